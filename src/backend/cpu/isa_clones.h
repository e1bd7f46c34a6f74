// The CPU backend's dot products compiled for AVX-512 beside the baseline, the one the
// machine has chosen when the program loads (GCC's function multiversioning through
// ifunc). The build stays runnable on any x86-64. There is no AVX2 clone: GCC 12's
// code for the sixteen-float vectors there was slower than the baseline's (lane_dot
// 0.46 against 0.27 ns an element, docs/PERFORMANCE.md, session 32). `flatten`
// inlines the callees so that they are compiled for each level too. The results do not depend on the level: the build
// contracts no multiply-add (-ffp-contract=off, CMakeLists.txt), and the vectorizer
// keeps each loop's order of float operations. A build for AVX-512 already
// (-march=native on such a machine) needs no clones, and GCC 12 fails on them there
// (an internal error in convert_move).
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__) && !defined(__clang__) && !defined(__AVX512F__)
#define ZINC_ISA_CLONES __attribute__((target_clones("arch=x86-64-v4", "default"), flatten))
#else
#define ZINC_ISA_CLONES
#endif
