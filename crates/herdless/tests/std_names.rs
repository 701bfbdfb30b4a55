//! The names a std or parking_lot user looks for, at the crate root: each is
//! the very type herdless's own name stands for (a value of one is a value
//! of the other), and the guards are lock_api 0.5's.
#![cfg(not(loom))]

use herdless::rwsem::{RwSemExt, RwSemMappedReadGuard, RwSemMappedWriteGuard};
use herdless::variants::RwSemConfig;
use herdless::{
    MappedMutexGuard, MappedRwLockReadGuard, MappedRwLockWriteGuard, Mutex, MutexGuard, RwLock,
    RwLockReadGuard, RwLockUpgradableReadGuard, RwLockWriteGuard, RwSem, RwSemReadGuard,
    RwSemUpgradableReadGuard, RwSemWriteGuard,
};

/// A function taking one name accepts a value built under the other.
fn takes_rwsem(lock: &RwSem<u32>) -> u32 {
    *lock.read()
}

#[test]
fn rwlock_is_rwsem_with_its_configurations() {
    for config in RwSemConfig::ALL {
        let lock: RwLock<u32> = RwLock::with_config(config, 7);
        assert_eq!(takes_rwsem(&lock), 7);
        let read: RwSemReadGuard<'_, u32> = lock.read();
        let read: RwLockReadGuard<'_, u32> = read;
        let other = lock.try_read().expect("readers share an RwLock");
        assert_eq!(*read + *other, 14);
        assert!(
            lock.try_write().is_none(),
            "{config}: a writer got in beside two readers"
        );
        drop((read, other));

        let write: RwLockWriteGuard<'_, u32> = lock.write();
        let mut write: RwSemWriteGuard<'_, u32> = write;
        *write += 1;
        let read: RwLockReadGuard<'_, u32> = RwLockWriteGuard::downgrade(write);
        assert_eq!(*read, 8);
        drop(read);

        let seen: RwLockUpgradableReadGuard<'_, u32> = lock.upgradable_read();
        let seen: RwSemUpgradableReadGuard<'_, u32> = seen;
        assert!(
            lock.try_read().is_some(),
            "{config}: an upgradable read shuts out readers"
        );
        let mut write = RwLockUpgradableReadGuard::upgrade(seen);
        *write = 9;
        drop(write);
        assert_eq!(lock.into_inner(), 9);
    }
}

#[test]
fn mapped_rwlock_guards_hold_the_lock_until_dropped() {
    let lock = RwLock::new((1u32, String::from("a")));
    let name: MappedRwLockWriteGuard<'_, String> =
        RwLockWriteGuard::map(lock.write(), |p| &mut p.1);
    let mut name: RwSemMappedWriteGuard<'_, String> = name;
    name.push('b');
    assert!(
        lock.try_read().is_none(),
        "a mapped write guard let a reader in"
    );
    drop(name);

    let count: MappedRwLockReadGuard<'_, u32> = RwLockReadGuard::map(lock.read(), |p| &p.0);
    let count: RwSemMappedReadGuard<'_, u32> = count;
    assert!(
        lock.try_write().is_none(),
        "a mapped read guard let a writer in"
    );
    assert_eq!((*count, lock.read().1.as_str()), (1, "ab"));
    drop(count);
    assert!(lock.try_write().is_some());
}

#[test]
fn mapped_mutex_guard_holds_the_mutex_until_dropped() {
    let pair = Mutex::new((1u32, String::from("one")));
    let guard: MutexGuard<'_, (u32, String)> = pair.lock();
    let mut name: MappedMutexGuard<'_, String> = MutexGuard::map(guard, |p| &mut p.1);
    name.push('!');
    assert!(
        pair.try_lock().is_none(),
        "a mapped guard let another locker in"
    );
    drop(name);
    assert_eq!(pair.lock().1, "one!");
}

/// The guards are lock_api 0.5's: code written against lock_api's generic
/// guard types takes them.
#[test]
fn guards_are_lock_api_0_5_types() {
    fn generic_read<R: lock_api::RawRwLock, T: Copy>(
        guard: lock_api::RwLockReadGuard<'_, R, T>,
    ) -> T {
        *guard
    }
    fn generic_lock<R: lock_api::RawMutex, T: Copy>(guard: lock_api::MutexGuard<'_, R, T>) -> T {
        *guard
    }
    let lock = RwLock::new(3);
    assert_eq!(generic_read(lock.read()), 3);
    let mutex = Mutex::new(4);
    assert_eq!(generic_lock(mutex.lock()), 4);
}
