//! Pinning a rank to a CPU from a run's list of CPUs, shared by the backends whose ranks are
//! processes or threads of this host (shm, tcp).

use crate::transport::error::{Error, Result};

/// The CPU of `rank` for a run's list of CPUs: `cpus[rank % len]` (the command line gives one
/// CPU per rank, or one for all), or `None` (no pinning) for an empty list.
pub fn cpu_for(cpus: &[usize], rank: u32) -> Option<usize> {
    (!cpus.is_empty()).then(|| cpus[rank as usize % cpus.len()])
}

/// Pin the calling thread to `cpu` (when given) and return the affinity actually in effect,
/// which the result document records beside the request.
pub fn pin(cpu: Option<usize>) -> Result<Vec<usize>> {
    use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
    use nix::unistd::Pid;
    if let Some(c) = cpu {
        let mut set = CpuSet::new();
        set.set(c).map_err(|_| {
            Error::Config(format!(
                "CPU {c} is out of range (at most {})",
                CpuSet::count() - 1
            ))
        })?;
        sched_setaffinity(Pid::from_raw(0), &set)
            .map_err(|e| Error::io(format!("pinning to CPU {c}"), e.into()))?;
    }
    let set = sched_getaffinity(Pid::from_raw(0))
        .map_err(|e| Error::io("reading the CPU affinity", e.into()))?;
    Ok((0..CpuSet::count())
        .filter(|&i| set.is_set(i).unwrap_or(false))
        .collect())
}

/// The CPUs this process may run on: its affinity mask, which `taskset` and cpusets narrow
/// (read on the calling thread; call it before pinning anything).
pub fn allowed() -> Result<Vec<usize>> {
    pin(None)
}

/// The CPUs online on this host, from `/sys/devices/system/cpu/online`; `None` when it cannot
/// be read.
pub fn online() -> Option<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_sysfs_list(text.trim())
}

/// A kernel CPU list (`0-3,6`) as CPU numbers; `None` when malformed.
/// One past the largest CPU number a kernel list is believed to name.
const MAX_SYSFS_CPU: usize = 1 << 16;

fn parse_sysfs_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for item in s.split(',').filter(|i| !i.is_empty()) {
        let (a, b): (usize, usize) = match item.split_once('-') {
            Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
            None => {
                let v = item.parse().ok()?;
                (v, v)
            }
        };
        // A list the kernel writes names CPUs below a few thousand; anything past 2^16 is not
        // one, and would otherwise be expanded into that many entries.
        if a > b || b >= MAX_SYSFS_CPU {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// CPU numbers as the kernel writes a list: ascending, runs as ranges (`0-3,6`).
pub fn format_list(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if j == i {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// Check a run's CPU list against what a rank of this process could be pinned to, before any
/// rank starts: every CPU must be `allowed` (this process's affinity); one that is not is
/// named, with whether it is missing from the host (not `online`) or only kept from this
/// process.
pub fn check_cpus(cpus: &[usize], allowed: &[usize], online: Option<&[usize]>) -> Result<()> {
    let Some(&bad) = cpus.iter().find(|c| !allowed.contains(c)) else {
        return Ok(());
    };
    let allowed_text = format_list(allowed);
    Err(Error::Config(match online {
        Some(on) if !on.contains(&bad) => format!(
            "CPU {bad} does not exist on this host, whose CPUs are {}{}",
            format_list(on),
            if on.len() == allowed.len() {
                String::new()
            } else {
                format!(" (this process may use {allowed_text})")
            }
        ),
        _ => format!(
            "CPU {bad} is not one this process may run on (its affinity, set by taskset or a \
             cpuset, allows {allowed_text})"
        ),
    }))
}

/// The backend-info entries for a pinning: `pinned_cpu` (the request, or null) and
/// `cpu_affinity` (the CPUs the rank may run on).
pub fn record(
    info: &mut crate::transport::BackendInfo,
    requested: Option<usize>,
    actual: &[usize],
) {
    info.insert(
        "pinned_cpu".into(),
        requested.map_or(serde_json::Value::Null, |c| (c as u64).into()),
    );
    info.insert(
        "cpu_affinity".into(),
        actual
            .iter()
            .map(|&c| serde_json::Value::from(c as u64))
            .collect::<Vec<_>>()
            .into(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_cycle_through_the_list() {
        assert_eq!(cpu_for(&[], 3), None);
        assert_eq!(cpu_for(&[3, 5], 0), Some(3));
        assert_eq!(cpu_for(&[3, 5], 1), Some(5));
        assert_eq!(cpu_for(&[3, 5], 2), Some(3));
    }

    #[test]
    fn cpu_lists_are_written_and_read_as_the_kernel_does() {
        assert_eq!(format_list(&[]), "");
        assert_eq!(format_list(&[3]), "3");
        assert_eq!(format_list(&[6, 0, 1, 2, 3, 9, 10]), "0-3,6,9-10");
        assert_eq!(
            parse_sysfs_list("0-3,6,9-10"),
            Some(vec![0, 1, 2, 3, 6, 9, 10])
        );
        assert_eq!(parse_sysfs_list("0"), Some(vec![0]));
        assert_eq!(parse_sysfs_list("3-1"), None);
        assert_eq!(parse_sysfs_list("x"), None);
        // Not a list a kernel writes: refused instead of expanded into 2^64 entries.
        assert_eq!(parse_sysfs_list("0-18446744073709551615"), None);
        assert_eq!(parse_sysfs_list("65535"), Some(vec![65535]));
        let on = online().expect("/sys/devices/system/cpu/online");
        assert!(!on.is_empty());
    }

    #[test]
    fn cpus_outside_the_affinity_are_named() {
        assert!(check_cpus(&[0, 1], &[0, 1], Some(&[0, 1])).is_ok());
        assert!(check_cpus(&[], &[0], None).is_ok());
        let e = check_cpus(&[1, 7], &[0, 1], Some(&[0, 1]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("CPU 7 does not exist") && e.contains("0-1"),
            "{e}"
        );
        let e = check_cpus(&[2], &[0, 1], Some(&[0, 1, 2, 3]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("CPU 2 is not one this process may run on") && e.contains("0-1"),
            "{e}"
        );
        let e = check_cpus(&[5], &[0, 1], Some(&[0, 1, 2, 3]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("0-3") && e.contains("may use 0-1"), "{e}");
        let e = check_cpus(&[5], &[1], None).unwrap_err().to_string();
        assert!(e.contains("CPU 5") && e.contains("allows 1"), "{e}");
        // This process may run on what it is allowed.
        let mine = std::thread::spawn(|| allowed().unwrap()).join().unwrap();
        assert!(check_cpus(&mine, &mine, online().as_deref()).is_ok());
    }

    #[test]
    fn pinning_is_read_back_and_bad_cpus_are_errors() {
        // On a thread of its own: the test harness's other threads keep their affinity.
        std::thread::spawn(|| {
            let all = pin(None).unwrap();
            assert!(!all.is_empty());
            assert_eq!(pin(Some(all[0])).unwrap(), vec![all[0]]);
            assert!(pin(Some(1 << 20)).is_err());
        })
        .join()
        .unwrap();
    }
}
