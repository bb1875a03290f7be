// SPDX-License-Identifier: GPL-2.0
//! The module's parameters as the driver reads them: the tunables
//! (declared in the C part, since 6.12's `kernel` crate has no module
//! parameters) and the live-object counters shown beside them.

use super::bindings as b;

/// The `max_sectors` module parameter (C part, read-only after load).
pub(crate) fn param_max_sectors() -> u32 {
    // SAFETY: a 0444 module parameter: written only while loading.
    unsafe { b::iser_rs_max_sectors }
}

/// The `inline_sends` module parameter (C part; 0644, read once per
/// connection setup).
pub(crate) fn param_inline_sends() -> bool {
    // SAFETY: a bool module parameter; a concurrent sysfs write stores a
    // whole byte, and either value is acceptable here.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inline_sends)) }
}

/// The `debug_level` module parameter (C part; 0644, read at each
/// message it gates): as ib_iser's, > 0 warnings, > 1 information, > 2
/// debug traces.
pub(crate) fn param_debug_level() -> i32 {
    // SAFETY: an aligned int module parameter; a concurrent sysfs write
    // stores a whole word, and any value is acceptable here.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_debug_level)) }
}

/// The `signal_every` module parameter (C part; 0644, read once per
/// connection setup), unclamped.
pub(crate) fn param_signal_every() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word, and any value is clamped by the caller.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_signal_every)) }
}

/// The `sq_depth` module parameter (C part; 0644, read once per
/// connection setup), unclamped: 0 asks for the full budget.
pub(crate) fn param_sq_depth() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word, and any value is clamped by the caller.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_sq_depth)) }
}

/// The `hello` module parameter (C part; 0644, read once per connection,
/// when it is established).
pub(crate) fn param_hello() -> bool {
    // SAFETY: a bool module parameter; a concurrent sysfs write stores a
    // whole byte, and either value is acceptable here.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_hello)) }
}

/// The `inject_send_pdu_delay_ms` fault-injection parameter (0644; 0: off).
pub(crate) fn param_inject_send_pdu_delay_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_send_pdu_delay_ms)) }
}

/// The `inject_logout_rsp_delay_ms` fault-injection parameter (0644; 0: off).
pub(crate) fn param_inject_logout_rsp_delay_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_logout_rsp_delay_ms)) }
}

/// The `inject_qp_send_sge` fault-injection parameter (0644; 0: off).
pub(crate) fn param_inject_qp_send_sge() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_qp_send_sge)) }
}

/// The `inject_send_pdu_busy_ms` fault-injection parameter (0644; 0: off).
pub(crate) fn param_inject_send_pdu_busy_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_send_pdu_busy_ms)) }
}

/// The `inject_setup_delay_ms` fault-injection parameter (0644; 0: off).
pub(crate) fn param_inject_setup_delay_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_setup_delay_ms)) }
}

/// The `inject_disconnect_delay_ms` fault-injection parameter (0644; 0:
/// off).
pub(crate) fn param_inject_disconnect_delay_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_disconnect_delay_ms)) }
}

/// The `inject_xmit_stall_ms` fault-injection parameter (0644; 0: off).
pub(crate) fn param_inject_xmit_stall_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_xmit_stall_ms)) }
}

/// The `inject_xmit_posting_stall_ms` fault-injection parameter (0644;
/// 0: off).
pub(crate) fn param_inject_xmit_posting_stall_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe {
        core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_xmit_posting_stall_ms))
    }
}

/// The `inject_xmit_wait_ms` test parameter (0644; 0: the built-in bound).
pub(crate) fn param_inject_xmit_wait_ms() -> u32 {
    // SAFETY: an aligned u32 module parameter; a concurrent sysfs write
    // stores a whole word.
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(b::iser_rs_inject_xmit_wait_ms)) }
}

/// Milliseconds since boot (`ktime_get_boottime`), any context.
pub(crate) fn now_ms() -> u64 {
    // SAFETY: reads the clock; no argument, no state.
    unsafe { b::iser_rs_now_ms() }
}

/// Sleeps `ms` milliseconds (the fault-injection delays). Process context
/// only, with no spinlock held.
pub(crate) fn msleep(ms: u32) {
    // SAFETY: msleep takes any value; the callers run in process context
    // holding no spinlock (see each caller).
    unsafe { b::msleep(ms) };
}

/// Fault injection (case 071): busy-waits in a transmit call until the
/// receive path met an early response ([`inject_early_rsp_met`]) or `ms`
/// milliseconds passed; one that met its response turns the stall
/// parameters off. Any context.
pub(crate) fn inject_xmit_stall(ms: u32) {
    // SAFETY: takes any value; only spins and writes the module's own
    // parameters.
    unsafe { b::iser_rs_inject_xmit_stall(ms) };
}

/// Fault injection (case 071): the receive path refused a response whose
/// command is not on the wire, or (`waiting`) found a transmit call on a
/// command it must act on and waits for the post (a response, or a Send
/// completion: in case 071 only the early response can). Ends an injected
/// transmit stall of any connection (see the C part for which events end
/// it); case 071 runs one session. Any context.
pub(crate) fn inject_early_rsp_met(waiting: bool) {
    // SAFETY: takes any value; only increments the module's own counter.
    unsafe { b::iser_rs_inject_early_rsp_met(waiting) };
}

/// Busy-waits `ms` milliseconds without sleeping (a fault-injection
/// delay). Any context.
pub(crate) fn mdelay(ms: u32) {
    // SAFETY: mdelay takes any value and only spins.
    unsafe { b::iser_rs_mdelay(ms) };
}

/// The module-wide live-object counters, shown as read-only module
/// parameters (`iser_rs_live[]` in the C part, in this order).
#[derive(Clone, Copy)]
#[repr(i32)]
pub(crate) enum Live {
    /// `live_conns`: endpoints.
    Conns = 0,
    /// `live_qps`: QPs.
    Qps = 1,
    /// `live_mrs`: fast-registration MRs.
    Mrs = 2,
    /// `live_pds`: protection domains.
    Pds = 3,
    /// `live_cqs`: CQs taken from the device's pool.
    Cqs = 4,
    /// `connects`: connections established since the module was loaded.
    Connects = 5,
}
// `iser_rs_live[6]` (`live_dma_pages`, the mapped pages of receive and
// login buffer areas) is counted by the C mapping calls themselves.

/// Adds `delta` to the live-object counter `which`.
pub(crate) fn live_add(which: Live, delta: i64) {
    // SAFETY: an atomic_add on a static array entry; every `Live` is an
    // index of that array (and the C side checks the range anyway).
    unsafe { b::iser_rs_live_add(which as i32, delta as i32) };
}
