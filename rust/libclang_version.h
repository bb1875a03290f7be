/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Makes bindgen's libclang print its version (the kernel's
 * scripts/rust_is_available_bindgen_libclang.h, which Debian's headers
 * packages do not ship). Kbuild reads it to decide whether libclang still
 * needs -enable-trivial-auto-var-init-zero-knowing-it-will-be-removed-from-clang
 * (libclang < 16), as the kernel's rust/Makefile does.
 */
#pragma message("clang version " __clang_version__)
