//! Which network addresses a delivery may connect to. A subscription's URL
//! is chosen by a tenant's operator, so without this a webhook is a way to
//! make the server call its own neighbours (server-side request forgery):
//! loopback, private and carrier-grade NAT networks, link-local (where
//! cloud metadata services answer), unique-local, unspecified, multicast,
//! broadcast, reserved and documentation ranges, and the IPv6 forms that
//! embed an IPv4 address (mapped, compatible, NAT64, 6to4), judged by the
//! address they embed. An operator may allow named CIDR ranges; a cloud
//! metadata address stays refused unless a range names it alone. This
//! module only judges addresses; it must never resolve a name or connect
//! (the sender asks it about every address a name resolves to, at the
//! moment of connecting).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Why an address was refused: the range it lies in, in words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{addr} is {why}, which deliveries do not connect to")]
pub struct Refused {
    /// The address refused.
    pub addr: IpAddr,
    /// The kind of range it lies in (`a loopback address`, …).
    pub why: &'static str,
}

/// The cloud metadata services' addresses: AWS, GCP, Azure, OpenStack and
/// most others at 169.254.169.254; AWS's IPv6 endpoint; Alibaba's; Oracle's
/// older one.
pub const METADATA: [IpAddr; 4] = [
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    IpAddr::V4(Ipv4Addr::new(100, 100, 100, 200)),
    IpAddr::V4(Ipv4Addr::new(192, 0, 0, 192)),
];

/// What may be connected to: every public address, plus the ranges an
/// operator allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allowed: Vec<IpNet>,
}

impl AddressPolicy {
    /// Public addresses only.
    pub fn public_only() -> AddressPolicy {
        AddressPolicy::default()
    }

    /// Public addresses and those in `allowed` (e.g. `10.20.0.0/16` for a
    /// receiver on the operator's own network). A metadata address is
    /// allowed only by a range that holds it alone (`169.254.169.254/32`),
    /// never by a wider one that happens to contain it.
    pub fn allowing(allowed: Vec<IpNet>) -> AddressPolicy {
        AddressPolicy { allowed }
    }

    /// The ranges allowed beyond public addresses.
    pub fn allowed(&self) -> &[IpNet] {
        &self.allowed
    }

    /// Whether a delivery may connect to `addr`.
    pub fn check(&self, addr: IpAddr) -> Result<(), Refused> {
        let addr = canonical(addr);
        if METADATA.contains(&addr) {
            let named = self
                .allowed
                .iter()
                .any(|n| n.prefix_len() == n.max_prefix_len() && n.addr() == addr);
            return if named {
                Ok(())
            } else {
                Err(Refused {
                    addr,
                    why: "a cloud metadata address",
                })
            };
        }
        match special(addr) {
            None => Ok(()),
            Some(_) if self.allowed.iter().any(|n| n.contains(&addr)) => Ok(()),
            Some(why) => Err(Refused { addr, why }),
        }
    }
}

/// An IPv6 address that embeds an IPv4 one (mapped `::ffff:a.b.c.d`,
/// compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4 `2002:aabb:ccdd::`)
/// stands for the IPv4 address it reaches; others are themselves.
fn canonical(addr: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = addr else {
        return addr;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    // Compatible (deprecated, but still routed by some stacks to the IPv4
    // address): the top 96 bits zero; `::` and `::1` are themselves.
    if s[..6] == [0; 6] && !(s[6] == 0 && s[7] <= 1) {
        return IpAddr::V4(low);
    }
    // NAT64's well-known prefix 64:ff9b::/96.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return IpAddr::V4(low);
    }
    // 6to4: 2002:aabb:ccdd::/48 reaches a.b.c.d.
    if s[0] == 0x2002 {
        return IpAddr::V4(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    addr
}

/// The special-purpose range `addr` lies in, if any (IANA's registries,
/// less the ranges that are globally reachable).
fn special(addr: IpAddr) -> Option<&'static str> {
    match addr {
        IpAddr::V4(a) => special_v4(a),
        IpAddr::V6(a) => special_v6(a),
    }
}

fn special_v4(a: Ipv4Addr) -> Option<&'static str> {
    let o = a.octets();
    Some(match o {
        _ if a.is_unspecified() || o[0] == 0 => "an unspecified (\"this network\") address",
        _ if a.is_loopback() => "a loopback address",
        _ if a.is_private() => "a private (RFC 1918) address",
        [100, b, ..] if (64..128).contains(&b) => "a carrier-grade NAT (100.64/10) address",
        _ if a.is_link_local() => "a link-local address",
        [192, 0, 0, _] => "an IETF protocol address (192.0.0/24)",
        _ if a.is_documentation() => "a documentation address",
        [198, 18 | 19, ..] => "a benchmarking address (198.18/15)",
        _ if a.is_broadcast() => "the broadcast address",
        _ if a.is_multicast() => "a multicast address",
        [240..=255, ..] => "a reserved (240/4) address",
        _ => return None,
    })
}

fn special_v6(a: Ipv6Addr) -> Option<&'static str> {
    let s = a.segments();
    Some(match s {
        _ if a.is_unspecified() => "the unspecified address",
        _ if a.is_loopback() => "a loopback address",
        _ if a.is_multicast() => "a multicast address",
        [x, ..] if x & 0xfe00 == 0xfc00 => "a unique-local (fc00::/7) address",
        [x, ..] if x & 0xffc0 == 0xfe80 => "a link-local (fe80::/10) address",
        [x, ..] if x & 0xffc0 == 0xfec0 => "a site-local (fec0::/10) address",
        [0x2001, 0xdb8, ..] => "a documentation address",
        [0x100, 0, 0, 0, ..] => "a discard-only (100::/64) address",
        // Teredo tunnels to an address it hides; 2001::/23 is otherwise IETF
        // protocol assignments.
        [0x2001, x, ..] if x < 0x200 => "an IETF protocol (2001::/23) address",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn public_addresses_pass_and_every_internal_kind_is_refused() {
        let p = AddressPolicy::public_only();
        for ok in [
            "93.184.215.14",
            "8.8.8.8",
            "2606:4700::1111",
            "100.128.0.1",
            "172.32.0.1",
        ] {
            assert_eq!(p.check(ip(ok)), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("127.0.0.1", "loopback"),
            ("127.255.0.9", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "carrier-grade"),
            ("100.127.255.254", "carrier-grade"),
            ("169.254.1.1", "link-local"),
            ("169.254.169.254", "metadata"),
            ("100.100.100.200", "metadata"),
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "unspecified"),
            ("255.255.255.255", "broadcast"),
            ("224.0.0.1", "multicast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.1", "documentation"),
            ("198.18.0.1", "benchmarking"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("fd00:ec2::254", "metadata"),
            ("ff02::1", "multicast"),
            ("2001:db8::1", "documentation"),
            // IPv4 addresses in IPv6 clothing are judged as themselves.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:169.254.169.254", "metadata"),
            ("::127.0.0.1", "loopback"),
            ("::10.0.0.1", "private"),
            ("64:ff9b::7f00:1", "loopback"),
            ("2002:a9fe:a9fe::", "metadata"),
            ("2002:c0a8:0101::1", "private"),
        ] {
            let refused = p.check(ip(bad)).expect_err(bad);
            assert!(refused.to_string().contains(why), "{bad}: {refused}");
        }
        // Mapped forms of public addresses stay public.
        assert_eq!(p.check(ip("::ffff:8.8.8.8")), Ok(()));
        assert_eq!(p.check(ip("2002:0808:0808::1")), Ok(()));
    }

    #[test]
    fn an_allowed_range_admits_its_addresses_and_no_others() {
        let p = AddressPolicy::allowing(vec![
            "127.0.0.0/8".parse().expect("net"),
            "10.20.0.0/16".parse().expect("net"),
            "fd00:1::/32".parse().expect("net"),
        ]);
        assert_eq!(p.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(p.check(ip("::ffff:127.0.0.1")), Ok(()));
        assert_eq!(p.check(ip("10.20.3.4")), Ok(()));
        assert_eq!(p.check(ip("fd00:1::5")), Ok(()));
        assert!(p.check(ip("10.21.0.1")).is_err());
        assert!(p.check(ip("::1")).is_err());
        assert!(p.check(ip("192.168.0.1")).is_err());
    }

    #[test]
    fn a_metadata_address_needs_a_range_that_names_it_alone() {
        let wide = AddressPolicy::allowing(vec!["169.254.0.0/16".parse().expect("net")]);
        assert_eq!(wide.check(ip("169.254.10.10")), Ok(()));
        assert!(wide.check(ip("169.254.169.254")).is_err());
        let wide6 = AddressPolicy::allowing(vec!["fc00::/7".parse().expect("net")]);
        assert!(wide6.check(ip("fd00:ec2::254")).is_err());
        let named = AddressPolicy::allowing(vec!["169.254.169.254/32".parse().expect("net")]);
        assert_eq!(named.check(ip("169.254.169.254")), Ok(()));
    }
}
