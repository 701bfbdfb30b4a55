//! The lab's experiments, one per seed, each a piece of data for the
//! harness (see `harness` for how to add one).

use crate::harness::{Experiment, LabError};

pub mod async_tasks;
pub mod bounce;
pub mod epoll;
pub mod fault_around;
pub mod firecracker;
pub mod futex_wake;
pub mod herd;
mod lab_s3;
pub mod locks;
pub mod restore;
pub mod rwsem;

/// Every experiment, in the order `all` runs them.
pub fn all() -> Vec<Experiment> {
    vec![
        futex_wake::experiment(),
        herd::experiment(),
        rwsem::experiment(),
        locks::experiment(),
        async_tasks::experiment(),
        epoll::experiment(),
        fault_around::experiment(),
        bounce::experiment(),
        restore::experiment(),
        firecracker::experiment(),
    ]
}

/// The experiment called `name`.
pub fn find(name: &str) -> Result<Experiment, LabError> {
    let mut all = all();
    match all.iter().position(|e| e.name == name) {
        Some(i) => Ok(all.swap_remove(i)),
        None => Err(LabError::UnknownExperiment {
            name: name.to_string(),
            known: all.iter().map(|e| e.name).collect::<Vec<_>>().join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_experiment_is_well_defined_and_uniquely_named() {
        let all = all();
        for (i, e) in all.iter().enumerate() {
            e.validate().unwrap();
            assert!(
                !all[..i].iter().any(|f| f.name == e.name),
                "{} twice",
                e.name
            );
        }
    }

    #[test]
    fn every_experiment_states_its_claim_and_every_section_its_evidence() {
        for e in all() {
            assert!(!e.claim.is_empty() && !e.mechanism.is_empty(), "{}", e.name);
            for s in &e.sections {
                assert!(!s.evidence.is_empty(), "{}: {}", e.name, s.title);
            }
        }
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_known_ones() {
        let err = find("no-such-thing").err().unwrap();
        assert!(err.to_string().contains("futex-wake"), "{err}");
    }
}
