/// A small command-line parser: `--flag`, `--option VALUE`, repeatable options and positionals. Unknown or
/// malformed arguments are errors with a clear message (no dependency on a parsing package).
public struct Arguments: Sendable {
    public private(set) var positionals: [String] = []
    private var options: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// A command line that cannot be used, and why (printed as the command's one line on stderr).
    public struct Failure: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) { self.description = description }
    }

    /// Parses `arguments` given which options take a value and which are plain flags.
    public init(_ arguments: [String], options valued: Set<String>, flags known: Set<String>) throws {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument.hasPrefix("--") {
                var name = String(argument.dropFirst(2))
                var inlineValue: String?
                if let equals = name.firstIndex(of: "=") {
                    inlineValue = String(name[name.index(after: equals)...])
                    name = String(name[..<equals])
                }
                if valued.contains(name) {
                    let value: String
                    if let inlineValue {
                        value = inlineValue
                    } else {
                        index += 1
                        guard index < arguments.count else { throw Failure(description: "--\(name) needs a value") }
                        value = arguments[index]
                    }
                    options[name, default: []].append(value)
                } else if known.contains(name), inlineValue == nil {
                    flags.insert(name)
                } else {
                    throw Failure(description: "unknown option --\(name)")
                }
            } else {
                positionals.append(argument)
            }
            index += 1
        }
    }

    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// Every flag set and option given, by name: an option's value in effect (the last given), a flag without
    /// one. Sorted by name.
    public var effective: [(name: String, value: String?)] {
        let valued = options.map { (name: $0.key, value: $0.value.last) }
        return (valued + flags.map { (name: $0, value: nil) }).sorted { $0.name < $1.name }
    }
    public func value(_ name: String) -> String? { options[name]?.last }
    public func values(_ name: String) -> [String] { options[name] ?? [] }

    public func integer(_ name: String, default fallback: Int) throws -> Int {
        guard let text = value(name) else { return fallback }
        guard let number = Int(text), number >= 0 else {
            throw Failure(description: "--\(name) takes a non-negative whole number, not \(text)")
        }
        return number
    }

    public func number(_ name: String) throws -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number >= 0 else {
            throw Failure(description: "--\(name) takes a non-negative number, not \(text)")
        }
        return number
    }

    public func required(_ name: String) throws -> String {
        guard let value = value(name) else { throw Failure(description: "--\(name) is required") }
        return value
    }
}
