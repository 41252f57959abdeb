//! Who a request comes from: the socket's peer address, or, when that peer is a trusted proxy,
//! the nearest untrusted address its `X-Forwarded-For` names. Rate limits are kept per
//! [`ClientKey`]: an IPv4 address, or an IPv6 /64 (one subscriber's usual allocation, so that
//! a client cannot step around its limit by changing the low bits of its address).

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use ipnet::IpNet;

/// The `X-Forwarded-For` header (HTTP) or metadata key (gRPC).
pub const FORWARDED_FOR: &str = "x-forwarded-for";

/// The peers whose `X-Forwarded-For` is believed (`trusted_proxies`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parse `trusted_proxies` entries: addresses (`10.0.0.1`, `::1`) or CIDR ranges
    /// (`10.0.0.0/8`). An entry that is neither is an error naming it.
    pub fn parse(entries: &[String]) -> Result<TrustedProxies, String> {
        entries
            .iter()
            .map(|e| {
                let e = e.trim();
                e.parse::<IpNet>()
                    .or_else(|_| e.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!("trusted_proxies: {e:?} is neither an IP address nor a CIDR range")
                    })
            })
            .collect::<Result<_, _>>()
            .map(TrustedProxies)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: `peer` itself unless `peer` is trusted; then, reading the
    /// `X-Forwarded-For` values (in header order, each a comma-separated list) from the right,
    /// the first address that is not a trusted proxy. Each proxy appends the address it
    /// received from, so everything left of the first untrusted entry may be forged by the
    /// client and is never read. An unparsable entry stops the walk at the last trusted hop.
    pub fn client_ip<'a>(
        &self,
        peer: IpAddr,
        forwarded_for: impl IntoIterator<Item = &'a str>,
    ) -> IpAddr {
        let peer = peer.to_canonical();
        if self.0.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let values: Vec<&str> = forwarded_for.into_iter().collect();
        let mut client = peer;
        for entry in values.iter().rev().flat_map(|v| v.rsplit(',')) {
            let Some(ip) = parse_entry(entry) else {
                return client;
            };
            client = ip;
            if !self.trusts(ip) {
                return ip;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`1.2.3.4:5`, `[::1]:5`).
fn parse_entry(entry: &str) -> Option<IpAddr> {
    let e = entry.trim();
    e.parse::<IpAddr>()
        .or_else(|_| e.parse::<SocketAddr>().map(|s| s.ip()))
        .ok()
        .map(|ip| ip.to_canonical())
}

/// What a rate limit counts against: an IPv4 address, or the /64 an IPv6 address is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientKey(IpAddr);

impl From<IpAddr> for ClientKey {
    fn from(ip: IpAddr) -> Self {
        ClientKey(match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
            v4 => v4,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn proxies(list: &[&str]) -> TrustedProxies {
        TrustedProxies::parse(&list.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let p = proxies(&["10.0.0.0/8"]);
        assert_eq!(
            p.client_ip(ip("192.0.2.7"), ["198.51.100.1"]),
            ip("192.0.2.7")
        );
        assert_eq!(
            TrustedProxies::default().client_ip(ip("127.0.0.1"), ["198.51.100.1"]),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn a_trusted_peer_names_the_nearest_untrusted_address() {
        let p = proxies(&["10.0.0.0/8", "127.0.0.1"]);
        // The client forged the first entry; the proxy appended the real one.
        assert_eq!(
            p.client_ip(ip("127.0.0.1"), ["203.0.113.9, 198.51.100.1"]),
            ip("198.51.100.1")
        );
        // Two proxies in a row, over two headers.
        assert_eq!(
            p.client_ip(ip("10.1.1.1"), ["198.51.100.2", "10.2.2.2"]),
            ip("198.51.100.2")
        );
        // Ports and IPv4-mapped IPv6 addresses.
        assert_eq!(
            p.client_ip(ip("10.1.1.1"), ["[2001:db8::1]:443"]),
            ip("2001:db8::1")
        );
        assert_eq!(
            p.client_ip(ip("::ffff:10.1.1.1"), ["1.2.3.4:80"]),
            ip("1.2.3.4")
        );
        // No header, garbage, or nothing but proxies: the last trusted hop.
        assert_eq!(p.client_ip(ip("10.1.1.1"), []), ip("10.1.1.1"));
        assert_eq!(
            p.client_ip(ip("10.1.1.1"), ["junk, 10.3.3.3"]),
            ip("10.3.3.3")
        );
        assert_eq!(p.client_ip(ip("10.1.1.1"), ["10.4.4.4"]), ip("10.4.4.4"));
    }

    #[test]
    fn entries_must_be_addresses_or_ranges() {
        assert!(TrustedProxies::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(TrustedProxies::parse(&["proxy.local".into()]).is_err());
        assert!(TrustedProxies::parse(&["::1".into(), " 192.168.0.0/16 ".into()]).is_ok());
    }

    #[test]
    fn ipv6_clients_share_their_slash_64() {
        assert_eq!(
            ClientKey::from(ip("2001:db8:1:2:aaaa::1")),
            ClientKey::from(ip("2001:db8:1:2:bbbb::2"))
        );
        assert_ne!(
            ClientKey::from(ip("2001:db8:1:2::1")),
            ClientKey::from(ip("2001:db8:1:3::1"))
        );
        assert_ne!(
            ClientKey::from(ip("1.2.3.4")),
            ClientKey::from(ip("1.2.3.5"))
        );
    }
}
