// SPDX-License-Identifier: GPL-2.0
//! Raw bindings for the C APIs iser-rs uses, generated at build time by the
//! Kbuild bindgen rule from `rust/bindings_helper.h`.
//!
//! Nothing outside `rust/sys/` may name these items: the wrappers beside
//! this file are the only users.

#![allow(
    dead_code,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    improper_ctypes,
    unreachable_pub,
    unsafe_op_in_unsafe_fn,
    missing_docs,
    clippy::all,
    unknown_lints,
    unnecessary_transmutes,
    clippy::undocumented_unsafe_blocks,
    // Pedantic lints 7.3's CLIPPY=1 enables, which bindgen's bitfield
    // accessors trip (the kernel's own bindings allow the same four).
    clippy::as_underscore,
    clippy::cast_lossless,
    clippy::ptr_as_ptr,
    clippy::ref_as_ptr
)]

// The kernel's own bindings blocklist these to map them to the Rust pointer
// width types; ours do the same (rust/bindgen_parameters).
type __kernel_size_t = usize;
type __kernel_ssize_t = isize;
type __kernel_ptrdiff_t = isize;

// `OBJTREE` is not set for out-of-tree modules: the generated file sits next
// to this one's directory in the (M=) object tree, which is the source tree.
include!("../bindings_generated.rs");
