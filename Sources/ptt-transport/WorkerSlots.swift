/// Where each worker of `serve --workers N` sits, in two sets — one per generation, so an in-place upgrade starts
/// its new workers beside the old ones: set `s` holds workers `s·N ..< (s+1)·N` (their slots: the index of each in
/// the relay-wide memory and its supervisor's books) and sockets `s·N·L ..< (s+1)·N·L` of the SO_REUSEPORT group
/// (L event loops each). A connection ID names its socket modulo the whole group's size, so an ID issued by either
/// generation keeps steering to its own worker.
struct WorkerSlots: Sendable, Equatable {
    /// Workers per generation.
    let workers: Int
    let loopsPerWorker: Int

    /// Both sets' workers.
    var count: Int { 2 * workers }
    /// Both sets' sockets: the group's size.
    var totalSockets: Int { 2 * workers * loopsPerWorker }

    /// The set (0 or 1) of a slot.
    func set(of slot: Int) -> Int { slot / workers }
    /// The slots of set `set`.
    func slots(set: Int) -> Range<Int> { (set * workers)..<((set + 1) * workers) }
    /// The group's sockets of set `set`: where its generation takes new connections.
    func sockets(set: Int) -> Range<Int> { (set * workers * loopsPerWorker)..<((set + 1) * workers * loopsPerWorker) }
    /// The group's sockets of one worker's event loops.
    func loops(slot: Int) -> Range<Int> { (slot * loopsPerWorker)..<((slot + 1) * loopsPerWorker) }
}
