//! Pinning a rank to a CPU from a run's list of CPUs, shared by the backends whose ranks are
//! processes or threads of this host (shm, tcp).

use crate::transport::error::{Error, Result};

/// The CPU of `rank` for a run's list of CPUs: `cpus[rank % len]`, or `None` (no
/// pinning) for an empty list.
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
