//! A system call's return value as a `Result`, in one place (std keeps the same helper, `cvt`,
//! for its own calls): every call this crate makes reports failure as -1 (a negative value)
//! with the reason in errno.

use std::io;

/// The integer types system calls return: `c_int` from libc's wrappers, `c_long` from
/// syscall(2).
pub(crate) trait Returned: Copy {
    fn failed(self) -> bool;
}

impl Returned for libc::c_int {
    fn failed(self) -> bool {
        self < 0
    }
}

impl Returned for libc::c_long {
    fn failed(self) -> bool {
        self < 0
    }
}

/// `r` if the call succeeded, errno's error if it failed. Read errno right after the call:
/// anything in between may overwrite it.
#[inline]
pub(crate) fn cvt<T: Returned>(r: T) -> io::Result<T> {
    if r.failed() {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_negative_return_is_errnos_error_and_the_rest_pass() {
        assert_eq!(cvt(0 as libc::c_int).unwrap(), 0);
        assert_eq!(cvt(7 as libc::c_long).unwrap(), 7);
        // SAFETY: close(2) of a descriptor that cannot be open fails with EBADF and touches
        // nothing.
        let r = unsafe { libc::close(-1) };
        assert_eq!(cvt(r).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}
