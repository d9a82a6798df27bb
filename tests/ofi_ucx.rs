//! The command line over the opt-in libfabric and UCX backends (`--features ofi`, `--features
//! ucx`): each built only with its feature, and empty without (`.ci/ofi.sh` and `.ci/ucx.sh`
//! run them). A test binary of their own, so that the gate builds the default backends' tests
//! once, not again with every feature.

#[allow(unused)]
mod common;

#[cfg(any(feature = "ofi", feature = "ucx"))]
use common::{runs::*, *};

/// The libfabric backend (`--features ofi`): a run on each provider CI tests, its result
/// naming the provider and the sizes injected, a provider that is not there refused with the
/// list of those that are, and a killed peer named within the timeout (a ping-pong fails with
/// it; all-pairs goes on without it).
#[cfg(feature = "ofi")]
mod ofi {
    use super::*;

    #[test]
    fn runs_on_shm_and_tcp_recording_the_provider_and_inject() {
        for provider in ["shm", "tcp;ofi_rxm"] {
            let doc = quick_doc(
                &format!("ofi-{}", provider.replace(';', "-")),
                &["--backend", "ofi", "--ofi-provider", provider],
                &[8, 100_000],
                &[],
            );
            let info = &doc["environment"]["backend_info"];
            assert_eq!(info["provider"], provider, "{info}");
            let options = &doc["config"]["backend_options"]["ofi"];
            assert_eq!(options["ofi_provider"], provider, "{options}");
            assert_eq!(options["ofi_provider_given"], provider, "{options}");
            let inject = info["inject_size"].as_u64().unwrap();
            assert!(inject > 8 && inject < 100_000, "{info}");
            let sends = info["sends"].as_array().unwrap();
            let injected = |bytes: u64| {
                sends
                    .iter()
                    .find(|s| s["bytes"] == bytes)
                    .map(|s| s["inject"].as_bool().unwrap())
            };
            assert_eq!(injected(8), Some(true), "{info}");
            assert_eq!(injected(100_000), Some(false), "{info}");
        }
    }

    #[test]
    fn message_buffers_are_checked_cold_single_and_placed_over_tcp_ofi_rxm() {
        buffers_recorded(
            "ofi-buffers",
            &["--backend", "ofi", "--ofi-provider", "tcp;ofi_rxm"],
        );
    }

    #[test]
    fn allpairs_fills_the_matrix_over_tcp_ofi_rxm() {
        allpairs_complete(
            "ofi-allpairs",
            &["--backend", "ofi", "--ofi-provider", "tcp;ofi_rxm"],
        );
    }

    #[test]
    fn an_absent_provider_is_bad_usage_listing_the_available_ones() {
        let out = run(&[
            "pingpong",
            "--backend",
            "ofi",
            "--ofi-provider",
            "no-such-provider",
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no provider `no-such-provider`"), "{err}");
        assert!(err.contains("available:") && err.contains("shm"), "{err}");
    }

    #[test]
    fn seed004_queues_run_on_ofi_within_what_the_provider_holds() {
        let d = tmpdir("ofi-queue");
        let out = run(&[
            "queue",
            "posted",
            "--backend",
            "ofi",
            "--ofi-provider",
            "tcp;ofi_rxm",
            "--lengths",
            "0,100",
            "--traversed",
            "100",
            "--trials",
            "20",
            "--quiet",
            "--output",
            d.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{out:?}");
        let doc = read_json(&d.join("result.json"));
        let lengths: Vec<u64> = doc["points"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["queue_length"].as_u64())
            .collect();
        assert_eq!(lengths, [0, 100], "{doc}");
        // shm's receive queue holds 1024: a longer posted queue is refused before the run.
        let out = run(&[
            "queue",
            "posted",
            "--backend",
            "ofi",
            "--ofi-provider",
            "shm",
            "--lengths",
            "0,1500",
        ]);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("receives posted at once") && err.contains("holds at most"),
            "{err}"
        );
    }

    #[test]
    fn wildcard_benchmarks_are_refused_on_the_shm_provider_before_they_start() {
        if commbench_ofi_defect().is_none() {
            return;
        }
        for args in [
            &["queue", "posted", "--any-source"][..],
            &["interference", "--streams", "1"][..],
        ] {
            let mut all = args.to_vec();
            all.extend_from_slice(&["--backend", "ofi", "--ofi-provider", "shm"]);
            let out = run(&all);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains("wildcard receives") && err.contains("tcp;ofi_rxm"),
                "{err}"
            );
            assert!(out.stdout.is_empty(), "{args:?} measured before refusing");
        }
    }

    /// Whether this host's shm provider has the wildcard defect (`commbench backends` would
    /// not say; the provider's version does: libfabric 1.17's is 117.x).
    fn commbench_ofi_defect() -> Option<()> {
        let out = std::process::Command::new("fi_info")
            .args(["-p", "shm", "-t", "FI_EP_RDM", "-v"])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find(|l| l.trim_start().starts_with("version:"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok())
            .filter(|&major| major <= 117)
            .map(drop)
    }

    #[test]
    fn ofi_ranks_started_by_hand() {
        ranks_started_by_hand_complete_a_run(&[
            "--backend",
            "ofi",
            "--ofi-provider",
            "tcp;ofi_rxm",
        ]);
    }

    #[test]
    fn ofi_killed_peer() {
        killed_peer_gives_error_and_partial_results(&["--backend", "ofi", "--ofi-provider", "shm"]);
    }

    /// A rank killed during all-pairs over tcp;ofi_rxm: the run goes on without it, and the
    /// others meet over their endpoints at the end rather than on the rendezvous, which
    /// would wait for it.
    #[test]
    fn a_killed_rank_in_allpairs_is_named_lost_and_the_run_completes() {
        rank_lost_mid_run(
            "allpairs-killed-ofi",
            &["--backend", "ofi", "--ofi-provider", "tcp;ofi_rxm"],
            nix::sys::signal::Signal::SIGKILL,
            POLLING,
        );
    }
}

/// The UCX backend (`--features ucx`): a run over shared memory and over tcp, its result naming
/// the transports, lanes and the protocol of each size; transports that are not there, or cma
/// alone, refused; seed 001's and seed 004's benchmarks; a killed peer named within the
/// timeout (a ping-pong fails with it; all-pairs goes on without it).
#[cfg(feature = "ucx")]
mod ucx {
    use super::*;

    #[test]
    fn message_buffers_are_checked_cold_single_and_placed_over_shared_memory() {
        buffers_recorded(
            "ucx-buffers",
            &["--backend", "ucx", "--ucx-tls", "posix,self"],
        );
    }

    #[test]
    fn allpairs_fills_the_matrix_over_shared_memory() {
        allpairs_complete(
            "ucx-allpairs",
            &["--backend", "ucx", "--ucx-tls", "posix,self"],
        );
    }

    #[test]
    fn runs_on_shared_memory_and_tcp_recording_lanes_and_protocols() {
        for (tls, lane) in [("posix,self", "posix/"), ("tcp", "tcp/")] {
            let doc = quick_doc(
                &format!("ucx-{}", tls.replace(',', "-")),
                &["--backend", "ucx", "--ucx-tls", tls],
                &[8, 1_000_000],
                &[],
            );
            let info = &doc["environment"]["backend_info"];
            assert_eq!(info["tls"], tls, "{info}");
            let options = &doc["config"]["backend_options"]["ucx"];
            assert_eq!(options["ucx_tls"], tls, "{options}");
            assert!(
                info["peers"][0]["lanes"].to_string().contains(lane),
                "{info}"
            );
            let sends = info["sends"].as_array().unwrap();
            let proto = |bytes: u64| {
                sends
                    .iter()
                    .find(|s| s["bytes"] == bytes)
                    .and_then(|s| s["protocol"].as_str())
                    .unwrap_or("")
                    .to_string()
            };
            if info["peers"][0]["tag_send"] == ""
                || info["protocol_source"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("none"))
            {
                // No thresholds, or not the ones UCX sends by: the v2 protocols (UCX_PROTO_ENABLE,
                // the default from 1.16).
                assert_eq!(proto(8), "unknown", "{info}");
            } else {
                assert_eq!(proto(8), "egr/short", "{info}");
                assert!(proto(1_000_000).starts_with("rndv"), "{info}");
            }
        }
    }

    #[test]
    fn absent_transports_and_cma_alone_are_bad_usage() {
        for (tls, says) in [
            ("no-such-tl", "no transport `no-such-tl`"),
            ("cma,self", "needs posix or sysv"),
            ("posix,,self", "empty transport name"),
        ] {
            let out = run(&["pingpong", "--backend", "ucx", "--ucx-tls", tls]);
            assert_eq!(out.status.code(), Some(2), "{tls}: {out:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(says) && err.contains("hint:"), "{tls}: {err}");
            assert!(out.stdout.is_empty(), "{tls}: measured before refusing");
        }
    }

    #[test]
    fn seed001_and_seed004_benchmarks_run_on_ucx() {
        let runs: [&[&str]; 4] = [
            &[
                "queue",
                "posted",
                "--lengths",
                "0,50",
                "--traversed",
                "50",
                "--trials",
                "20",
            ],
            &[
                "queue",
                "unexpected",
                "--any-source",
                "--lengths",
                "0,20",
                "--trials",
                "20",
            ],
            &[
                "interference",
                "--streams",
                "1",
                "--repetitions",
                "2",
                "--messages",
                "20",
            ],
            &[
                "echo",
                "--hops",
                "1..1",
                "--repetitions",
                "2",
                "--messages",
                "20",
                "--sizes",
                "0,100",
            ],
        ];
        for args in runs {
            let d = tmpdir(&format!("ucx-{}", args[..2].join("-")));
            let mut all = args.to_vec();
            all.extend_from_slice(&[
                "--backend",
                "ucx",
                "--ucx-tls",
                "posix,self",
                "--quiet",
                "--output",
                d.to_str().unwrap(),
            ]);
            let out = run(&all);
            assert!(out.status.success(), "{args:?}: {out:?}");
            let doc = read_json(&d.join("result.json"));
            assert_eq!(doc["status"], "complete", "{args:?}: {doc}");
            assert!(!doc["points"].as_array().unwrap().is_empty(), "{args:?}");
        }
    }

    #[test]
    fn ucx_ranks_started_by_hand() {
        ranks_started_by_hand_complete_a_run(&["--backend", "ucx", "--ucx-tls", "tcp"]);
    }

    #[test]
    fn ucx_killed_peer() {
        killed_peer_gives_error_and_partial_results(&["--backend", "ucx", "--ucx-tls", "tcp"]);
        killed_peer_gives_error_and_partial_results(&[
            "--backend",
            "ucx",
            "--ucx-tls",
            "posix,self",
        ]);
    }

    /// A rank killed during all-pairs over UCX's tcp transport: the run goes on without it,
    /// the others meet over their endpoints at the end, and close those to it without a
    /// flush.
    #[test]
    fn a_killed_rank_in_allpairs_is_named_lost_and_the_run_completes() {
        rank_lost_mid_run(
            "allpairs-killed-ucx",
            &["--backend", "ucx", "--ucx-tls", "tcp"],
            nix::sys::signal::Signal::SIGKILL,
            POLLING,
        );
    }
}
