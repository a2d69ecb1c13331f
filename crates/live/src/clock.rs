//! Monotonic time as [`Nanos`], and absolute sleeps.

use punctual_units::Nanos;

/// Which kernel clock a reading comes from. Probes use `Monotonic` so their
/// timestamps line up with tracefs's `mono` trace clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockId {
    Monotonic,
    MonotonicRaw,
}

impl ClockId {
    fn raw(self) -> libc::clockid_t {
        match self {
            ClockId::Monotonic => libc::CLOCK_MONOTONIC,
            ClockId::MonotonicRaw => libc::CLOCK_MONOTONIC_RAW,
        }
    }
}

/// Current time of `clock` in nanoseconds since its (boot-time) epoch.
#[inline]
pub fn now(clock: ClockId) -> Nanos {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; the clock ids are constants
    // every Linux kernel supports.
    unsafe { libc::clock_gettime(clock.raw(), &mut ts) };
    Nanos(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

#[inline]
pub fn mono() -> Nanos {
    now(ClockId::Monotonic)
}

/// Sleeps until the absolute CLOCK_MONOTONIC time `t`, retrying on EINTR
/// (a signal interrupts the sleep, not the period).
pub fn sleep_until(t: Nanos) {
    let ts = libc::timespec {
        tv_sec: (t.0 / 1_000_000_000) as libc::time_t,
        tv_nsec: (t.0 % 1_000_000_000) as libc::c_long,
    };
    loop {
        // SAFETY: ts is valid; remain may be null with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

/// Spins until CLOCK_MONOTONIC reaches `t`, returning the time it stopped.
#[inline]
pub fn spin_until(t: Nanos) -> Nanos {
    loop {
        let n = mono();
        if n >= t {
            return n;
        }
        std::hint::spin_loop();
    }
}
