//! `cmd`: an external program as load (stress-ng, a build, a game server…),
//! run from an argument vector without a shell, in its own process group,
//! and stopped with the run: SIGTERM to the group, SIGKILL after a grace
//! period. It also gets SIGKILL if the load worker dies (PR_SET_PDEATHSIG,
//! from the thread that stays alive for the whole run).

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::spec::CmdOpts;
use crate::util::{secs, Ctl, Outcome};
use crate::{LoadError, Prepared, Running};

/// How long a command gets between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

struct CmdPrepared(CmdOpts);

pub(crate) fn prepare(o: &CmdOpts) -> Result<Box<dyn Prepared>, LoadError> {
    let prog = &o.argv[0];
    // Resolve now so a typo is a usage error, not a dead load mid-run.
    if !prog.contains('/') {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
            .unwrap_or(false);
        if !found {
            return Err(LoadError::Invalid(format!(
                "cmd: program '{prog}' is not on PATH"
            )));
        }
    } else if !std::path::Path::new(prog).is_file() {
        return Err(LoadError::Invalid(format!(
            "cmd: program '{prog}' does not exist"
        )));
    }
    Ok(Box::new(CmdPrepared(o.clone())))
}

struct Report {
    ran: Duration,
    exit_code: Option<i32>,
    signal: Option<i32>,
    exited_early: bool,
    killed: bool,
    pid: u32,
    error: Option<String>,
}

struct CmdRunning {
    handle: JoinHandle<Report>,
}

impl Prepared for CmdPrepared {
    fn start(self: Box<Self>, ctl: Ctl) -> Box<dyn Running> {
        let argv = self.0.argv;
        let (tx, _rx) = mpsc::channel::<()>();
        let handle = std::thread::Builder::new()
            .name("pl-cmd".into())
            .spawn(move || {
                let _keep = tx;
                let t0 = Instant::now();
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]).stdin(Stdio::null()).process_group(0);
                let parent = std::process::id() as libc::pid_t;
                // SAFETY: only async-signal-safe calls between fork and exec.
                unsafe {
                    cmd.pre_exec(move || {
                        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                        if libc::getppid() != parent {
                            libc::_exit(1);
                        }
                        Ok(())
                    });
                }
                let mut child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => {
                        return Report {
                            ran: Duration::ZERO,
                            exit_code: None,
                            signal: None,
                            exited_early: true,
                            killed: false,
                            pid: 0,
                            error: Some(format!("cmd: could not start '{}': {e}", argv[0])),
                        }
                    }
                };
                let pid = child.id();
                let mut status = None;
                while !ctl.done() {
                    if let Ok(Some(s)) = child.try_wait() {
                        status = Some(s);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(10).min(ctl.left()));
                }
                let exited_early = status.is_some();
                let mut killed = false;
                if status.is_none() {
                    // SAFETY: signalling the group we created.
                    unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGTERM) };
                    let t = Instant::now();
                    while t.elapsed() < GRACE {
                        if let Ok(Some(s)) = child.try_wait() {
                            status = Some(s);
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    if status.is_none() {
                        // SAFETY: as above.
                        unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
                        killed = true;
                        status = child.wait().ok();
                    }
                }
                // Anything the command left in its group goes too.
                // SAFETY: as above; ESRCH when the group is empty is fine.
                unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
                Report {
                    ran: t0.elapsed(),
                    exit_code: status.and_then(|s| s.code()),
                    signal: status.and_then(|s| s.signal()),
                    exited_early,
                    killed,
                    pid,
                    error: None,
                }
            })
            .expect("spawn cmd supervisor");
        Box::new(CmdRunning { handle })
    }
}

impl Running for CmdRunning {
    fn finish(self: Box<Self>) -> Outcome {
        let mut out = Outcome::default();
        let r = match self.handle.join() {
            Ok(r) => r,
            Err(_) => {
                out.warnings.push("cmd: supervisor panicked".into());
                return out;
            }
        };
        if let Some(e) = r.error {
            out.warnings.push(e);
            return out;
        }
        out.set("duration_s", secs(r.ran));
        out.set("pid", r.pid as f64);
        out.set("exited_early", if r.exited_early { 1.0 } else { 0.0 });
        out.set("needed_sigkill", if r.killed { 1.0 } else { 0.0 });
        if let Some(c) = r.exit_code {
            out.set("exit_code", c as f64);
        }
        if let Some(s) = r.signal {
            out.set("exit_signal", s as f64);
        }
        if r.exited_early {
            out.warnings.push(format!(
                "cmd: the command ended by itself after {:.1} s, before the run did",
                secs(r.ran)
            ));
        }
        out
    }
}
