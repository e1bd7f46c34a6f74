// The CPU backend's dot products compiled for AVX-512, AVX2 and the baseline, the one
// the machine has chosen when the program loads (GCC's function multiversioning
// through ifunc). The build stays runnable on any x86-64. Each level's version is its
// own function (target, not target_clones) because each runs vectors of its own width
// (row_dot.cpp). `flatten` inlines the callees so that they are compiled for each
// level too. The results do not depend on the level: the build contracts no
// multiply-add (-ffp-contract=off, CMakeLists.txt), and the vectorizer keeps each
// loop's order of float operations. A build for AVX-512 already (-march=native on such
// a machine) needs no versions, and GCC 12 fails on them there (an internal error in
// convert_move).
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#define ZINC_ISA_LEVELS 1
#define ZINC_ISA_LEVEL(level) __attribute__((target(level), flatten))
#else
#define ZINC_ISA_LEVELS 0
#endif
