// PTTFuzz: the seeded fuzzer behind `ptt-lab fuzz`. It feeds random and mutated inputs — mutations of
// valid encodings the project's own encoders produce, and of flights its own client sends — to every parser the
// project owns, to the CLI, and to a live relay's UDP and TCP sockets, and counts inputs, rejections and crashes.
// Runs are reproducible: one 64-bit seed determines every input.
