//! Bounded, self-stopping stress loads on this machine (loopback net, disk, cpu, memory, timers, commands).
