import Glibc

/// Whether this build runs under ThreadSanitizer or AddressSanitizer (their runtimes' entry points are linked in),
/// for tests: those that run the CLI under a tiny `ulimit -n` are skipped there (the sanitizer's runtime needs
/// descriptors of its own and aborts before the code under test runs), and rate or timing bars that a 5-10x slower
/// build cannot meet are relaxed there, never the logic they check.
package let sanitizedBuild = ["__tsan_init", "__asan_init"].contains { (name: String) in
    dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) != nil
}
