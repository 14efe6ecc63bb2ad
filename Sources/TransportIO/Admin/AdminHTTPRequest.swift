/// The admin endpoint's request parser: from the bytes a connection sent so far to the bytes of its answer, or nil
/// while the request is incomplete and within bounds. Pure, so hostile input is tested without sockets.
package enum AdminHTTPRequest {
    /// The answer to `input`: the responder's for a complete GET (or HEAD, without the body), an error status for a
    /// request out of bounds or malformed; nil while more bytes may complete it.
    package static func answer(
        _ input: [UInt8], limits: AdminHTTPServer.Limits, respond: (String) -> AdminHTTPServer.Response
    ) -> [UInt8]? {
        guard let end = headerEnd(input) else {
            if input.count > limits.maxRequestBytes { return encode(status(431, "request too large"), head: false) }
            if lineCount(input) > limits.maxHeaders + 1 { return encode(status(431, "too many headers"), head: false) }
            return nil
        }
        guard end <= limits.maxRequestBytes else { return encode(status(431, "request too large"), head: false) }
        guard let text = String(validating: input[..<end], as: UTF8.self), text.allSatisfy(\.isASCII) else {
            return encode(status(400, "not ASCII"), head: false)
        }
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        while lines.last == "" { lines.removeLast() }
        guard lines.count - 1 <= limits.maxHeaders else { return encode(status(431, "too many headers"), head: false) }
        let parts = lines.first?.split(separator: " ", omittingEmptySubsequences: false) ?? []
        guard parts.count == 3, parts[2] == "HTTP/1.1" || parts[2] == "HTTP/1.0", parts[1].hasPrefix("/"),
            !parts[0].isEmpty, parts[0].allSatisfy({ $0.isUppercase }),
            lines.dropFirst().allSatisfy({ isHeader($0) })
        else { return encode(status(400, "malformed request"), head: false) }
        let head = parts[0] == "HEAD"
        guard parts[0] == "GET" || head else { return encode(status(405, "GET only"), head: false) }
        let path = parts[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
        return encode(respond(String(path)), head: head)
    }

    private static func status(_ code: Int, _ text: String) -> AdminHTTPServer.Response {
        .init(status: code, body: text + "\n")
    }

    /// A header line: a token, a colon, a value without control characters.
    private static func isHeader(_ line: Substring) -> Bool {
        guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else { return false }
        let name = line[..<colon]
        return name.allSatisfy { $0.isLetter || $0.isNumber || "-_".contains($0) }
            && line[colon...].unicodeScalars.allSatisfy { $0 == "\t" || ($0.value >= 0x20 && $0.value < 0x7F) }
    }

    /// The index just past the blank line ending the header block, if it arrived.
    private static func headerEnd(_ input: [UInt8]) -> Int? {
        guard input.count >= 4 else { return nil }
        for index in 3..<input.count
        where input[index] == 10 && input[index - 1] == 13 && input[index - 2] == 10 && input[index - 3] == 13 {
            return index + 1
        }
        return nil
    }

    private static func lineCount(_ input: [UInt8]) -> Int { input.reduce(0) { $0 + ($1 == 10 ? 1 : 0) } }

    private static func encode(_ response: AdminHTTPServer.Response, head: Bool) -> [UInt8] {
        let reason =
            [
                200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                431: "Request Header Fields Too Large",
                503: "Service Unavailable", 500: "Internal Server Error",
            ][response.status] ?? "Status"
        let body = Array(response.body.utf8)
        var text = "HTTP/1.1 \(response.status) \(reason)\r\nContent-Type: \(response.contentType)\r\n"
        text += "Content-Length: \(body.count)\r\nConnection: close\r\n"
        if response.status == 405 { text += "Allow: GET, HEAD\r\n" }
        text += "\r\n"
        return Array(text.utf8) + (head ? [] : body)
    }
}
