//! C ABI (`include/punctual.h`): a C program takes a reservation for its
//! calling thread, reports what it received so catch-up and feedback can
//! act, asks for time constraints, and reads a report.
//!
//! State is per thread, like the kernel's scheduling attributes. Every
//! function returns a status; the reason for a failure is kept for
//! `punctual_last_error`, as a sentence.

use std::cell::RefCell;
use std::os::raw::{c_char, c_int};

use punctual_live::clock::mono;
use punctual_units::Nanos;

use crate::controller::{catchup_should_yield, FeedbackController};
use crate::spec::{Mode, Spec};
use crate::{kernel, set_deadline, set_other, thread_cputime};

pub const PUNCTUAL_MODE_PLAIN: c_int = 0;
pub const PUNCTUAL_MODE_CATCHUP: c_int = 1;
pub const PUNCTUAL_MODE_FEEDBACK: c_int = 2;

/// Mirrors `struct punctual_report` in punctual.h.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PunctualReport {
    pub periods: u64,
    pub misses: u64,
    pub budget_ns: u64,
    pub period_ns: u64,
    /// C currently handed to the kernel.
    pub runtime_ns: u64,
    pub received_total_ns: u64,
    pub charged_total_ns: u64,
}

struct Held {
    spec: Spec,
    ctl: FeedbackController,
    runtime: Nanos,
    cpu_mark: Nanos,
    report: PunctualReport,
}

thread_local! {
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

fn fail(msg: String) -> c_int {
    LAST_ERROR.with(|e| *e.borrow_mut() = msg);
    -1
}

/// Takes a reservation of `budget_ns` every `period_ns` (deadline 0 =
/// period) for the calling thread. `gain` is Rez-FB's G (ignored
/// otherwise); `max_budget_ns` 0 = 1.5× the budget. Returns 0, or -1 with
/// the reason in `punctual_last_error`.
#[no_mangle]
pub extern "C" fn punctual_reserve_take(
    budget_ns: u64,
    period_ns: u64,
    deadline_ns: u64,
    mode: c_int,
    gain: f64,
    max_budget_ns: u64,
) -> c_int {
    let mode = match mode {
        PUNCTUAL_MODE_PLAIN => Mode::Plain,
        PUNCTUAL_MODE_CATCHUP => Mode::Catchup,
        PUNCTUAL_MODE_FEEDBACK => Mode::Feedback,
        m => {
            return fail(format!(
                "mode {m} is not PUNCTUAL_MODE_PLAIN, _CATCHUP or _FEEDBACK"
            ))
        }
    };
    let spec = match Spec::new(
        Nanos(budget_ns),
        Nanos(period_ns),
        (deadline_ns != 0).then_some(Nanos(deadline_ns)),
        mode,
        gain,
        0.0,
        (max_budget_ns != 0).then_some(Nanos(max_budget_ns)),
    ) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if HELD.with(|h| h.borrow().is_some()) {
        return fail("this thread already holds a reservation; release it first".into());
    }
    let try_set = |rt: Nanos| {
        set_deadline(0, rt, spec.deadline, spec.period).map_err(|e| {
            kernel::explain_refusal(
                &e,
                rt,
                spec.period,
                std::thread::available_parallelism()
                    .map(|n| n.get() as u32)
                    .unwrap_or(1),
                &kernel::bandwidth(None),
            )
        })
    };
    if let Err(e) = try_set(spec.admitted_runtime()) {
        return fail(e);
    }
    let runtime = spec.initial_runtime();
    if runtime != spec.admitted_runtime() {
        if let Err(e) = try_set(runtime) {
            let _ = set_other(0);
            return fail(e);
        }
    }
    HELD.with(|h| {
        *h.borrow_mut() = Some(Held {
            ctl: FeedbackController::new(spec.target(), spec.max_budget, spec.gain_ratio),
            runtime,
            cpu_mark: thread_cputime(),
            report: PunctualReport {
                budget_ns,
                period_ns,
                runtime_ns: runtime.0,
                ..Default::default()
            },
            spec,
        })
    });
    0
}

/// Tells the library what the thread received so far in the current
/// period. Under catch-up, once that reaches the reservation the thread
/// yields the rest of the period (returns 1 after sleeping until the next
/// one); otherwise returns 0. -1 without a reservation.
#[no_mangle]
pub extern "C" fn punctual_reserve_received(received_ns: u64) -> c_int {
    let target = HELD.with(|h| h.borrow().as_ref().map(|x| (x.spec.mode, x.spec.target())));
    match target {
        None => fail("no reservation held by this thread".into()),
        Some((Mode::Catchup, t)) if catchup_should_yield(Nanos(received_ns), t) => {
            // SAFETY: plain syscall.
            unsafe { libc::sched_yield() };
            1
        }
        Some(_) => 0,
    }
}

/// Closes a period: `received_ns` is what the thread received in it (its
/// own measurement). Counts hit/miss and, under feedback, sets the next
/// period's budget. Returns 0, or -1.
#[no_mangle]
pub extern "C" fn punctual_reserve_period_end(received_ns: u64) -> c_int {
    let r = HELD.with(|h| {
        let mut g = h.borrow_mut();
        let Some(x) = g.as_mut() else {
            return Err("no reservation held by this thread".to_string());
        };
        let cpu = thread_cputime();
        let charged = cpu - x.cpu_mark;
        x.cpu_mark = cpu;
        x.report.periods += 1;
        if received_ns < x.spec.budget.0 {
            x.report.misses += 1;
        }
        x.report.received_total_ns += received_ns;
        x.report.charged_total_ns += charged.0;
        if x.spec.mode == Mode::Feedback {
            let next = x.ctl.update(charged, Nanos(received_ns));
            if next != x.runtime {
                match set_deadline(0, next, x.spec.deadline, x.spec.period) {
                    Ok(()) => x.runtime = next,
                    Err(_) => x.ctl.refused(x.runtime),
                }
            }
        }
        x.report.runtime_ns = x.runtime.0;
        Ok(())
    });
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

/// Returns the thread to SCHED_OTHER and forgets the reservation.
#[no_mangle]
pub extern "C" fn punctual_reserve_release() -> c_int {
    let had = HELD.with(|h| h.borrow_mut().take()).is_some();
    if !had {
        return fail("no reservation held by this thread".into());
    }
    match set_other(0) {
        Ok(()) => 0,
        Err(e) => fail(format!("could not return to SCHED_OTHER: {e}")),
    }
}

/// Copies the thread's report into `out`. Returns 0, or -1.
///
/// # Safety
/// `out` must point to a writable `struct punctual_report`.
#[no_mangle]
pub unsafe extern "C" fn punctual_reserve_report(out: *mut PunctualReport) -> c_int {
    if out.is_null() {
        return fail("report pointer is NULL".into());
    }
    match HELD.with(|h| h.borrow().as_ref().map(|x| x.report)) {
        Some(r) => {
            // SAFETY: the caller promises out is valid and writable.
            unsafe { *out = r };
            0
        }
        None => fail("no reservation held by this thread".into()),
    }
}

/// Asks for `estimate_ns` of CPU between `start_in_ns` and
/// `deadline_in_ns` from now. 1 = granted (the thread now runs under it,
/// after sleeping until the start), 0 = denied (reason in
/// `punctual_last_error`).
#[no_mangle]
pub extern "C" fn punctual_begin_constraint(
    start_in_ns: u64,
    deadline_in_ns: u64,
    estimate_ns: u64,
) -> c_int {
    let now = mono();
    match crate::constraint::begin_constraint(
        now + Nanos(start_in_ns),
        now + Nanos(deadline_in_ns),
        Nanos(estimate_ns),
    ) {
        crate::constraint::Decision::Granted => 1,
        crate::constraint::Decision::Denied { reason } => {
            fail(reason);
            0
        }
    }
}

/// Ends the constraint; writes the wall time it took to `taken_ns` (may be
/// NULL). Returns 0, or -1 when none was active.
///
/// # Safety
/// `taken_ns` must be NULL or point to a writable uint64_t.
#[no_mangle]
pub unsafe extern "C" fn punctual_end_constraint(taken_ns: *mut u64) -> c_int {
    match crate::constraint::end_constraint() {
        Some(t) => {
            if !taken_ns.is_null() {
                // SAFETY: caller promises a valid pointer.
                unsafe { *taken_ns = t.elapsed_ns.0 };
            }
            0
        }
        None => fail("no constraint is active on this thread".into()),
    }
}

/// Copies the last failure's sentence (NUL-terminated, truncated to fit)
/// into `buf`; returns its full length.
///
/// # Safety
/// `buf` must be NULL or point to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn punctual_last_error(buf: *mut c_char, len: usize) -> usize {
    LAST_ERROR.with(|e| {
        let e = e.borrow();
        if !buf.is_null() && len > 0 {
            let n = e.len().min(len - 1);
            // SAFETY: n < len bytes fit in buf; the source is e's bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(e.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
        }
        e.len()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_fail_with_a_sentence_and_no_state() {
        assert_eq!(
            punctual_reserve_take(30_000_000, 20_000_000, 0, 0, 0.5, 0),
            -1
        );
        let mut buf = [0 as c_char; 256];
        // SAFETY: buf is 256 writable bytes.
        let n = unsafe { punctual_last_error(buf.as_mut_ptr(), buf.len()) };
        assert!(n > 0);
        // SAFETY: punctual_last_error NUL-terminated it.
        let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .to_string();
        assert!(s.contains("30ms"), "{s}");
        assert_eq!(
            punctual_reserve_take(4_000_000, 20_000_000, 0, 7, 0.5, 0),
            -1
        );
        assert_eq!(punctual_reserve_release(), -1);
        assert_eq!(punctual_reserve_period_end(1), -1);
        // SAFETY: null is allowed.
        assert_eq!(unsafe { punctual_end_constraint(std::ptr::null_mut()) }, -1);
    }
}
