//! The machine: hostname, interface addresses, page size.

use crate::sockaddr;
use std::net::IpAddr;

/// gethostname(2); `None` when it fails or is empty or not UTF-8.
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates on success when the
    // name fits, and the name is cut at the first NUL or the buffer end either way.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    let name = std::str::from_utf8(&buf[..end]).ok()?.trim().to_string();
    (!name.is_empty()).then_some(name)
}

/// Every IP address of this machine's interfaces (getifaddrs(3)), loopback included.
pub fn interface_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a linked list that is walked read-only here and freed
    // exactly once; every non-null ifa_addr points at a sockaddr of the size its family names.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut cur = head;
        while !cur.is_null() {
            let sa = (*cur).ifa_addr;
            if !sa.is_null() {
                if let Some(addr) = sockaddr::from_sockaddr(sa) {
                    out.push(addr.ip());
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out
}

/// The size of a memory page (sysconf(_SC_PAGESIZE)).
pub fn page_size() -> Option<usize> {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(page).ok().filter(|&p| p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_has_loopback_a_page_size_and_maybe_a_name() {
        assert!(interface_addresses().iter().any(|ip| ip.is_loopback()), "{:?}", interface_addresses());
        assert!(page_size().is_some_and(|p| p >= 4096 && p.is_power_of_two()));
        if let Some(name) = hostname() {
            assert!(!name.is_empty() && !name.contains('\0'));
        }
    }
}
