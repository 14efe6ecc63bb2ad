/// Outbound DATAGRAM frames waiting for room in a packet, each with an optional deadline.
///
/// Audio is useless late: a frame whose deadline passed is dropped and counted instead of sent, and the queue
/// is bounded (the oldest frame goes first when it is full), so nothing waits forever.
struct DatagramSendQueue {
    struct Entry {
        var payload: [UInt8]
        var deadline: UInt64  // UInt64.max: no expiry
        var id: UInt64
    }

    private var entries: [Entry] = []
    private var head = 0
    private var nextID: UInt64 = 0
    let capacity: Int

    /// Frames dropped because their deadline passed before a packet had room.
    private(set) var expired: UInt64 = 0
    /// Frames dropped because the queue was full.
    private(set) var overflowed: UInt64 = 0

    init(capacity: Int) { self.capacity = max(1, capacity) }

    var count: Int { entries.count - head }
    var isEmpty: Bool { count == 0 }

    mutating func enqueue(_ payload: [UInt8], deadline: UInt64) {
        if count >= capacity {
            head += 1
            overflowed += 1
        }
        entries.append(Entry(payload: payload, deadline: deadline, id: nextID))
        nextID &+= 1
        compactIfNeeded()
    }

    /// The oldest frame that is still fresh at `now`, dropping (and counting) stale ones on the way.
    mutating func peekFresh(now: UInt64) -> Entry? {
        while head < entries.count {
            if entries[head].deadline >= now { return entries[head] }
            head += 1
            expired += 1
        }
        compactIfNeeded()
        return nil
    }

    /// Removes the frame `peekFresh` returned.
    mutating func removeFirst() {
        precondition(head < entries.count)
        head += 1
        compactIfNeeded()
    }

    /// Drops every queued frame (the connection closed), counting them as expired.
    mutating func removeAll() {
        expired += UInt64(count)
        entries.removeAll()
        head = 0
    }

    private mutating func compactIfNeeded() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
