//! The HTTP client of every call Tidings makes on a workflow's behalf: `http_request` steps, attachments
//! fetched by URL, and the providers (whose base URL and webhook URLs come from integration and subscriber
//! credentials). Such URLs are chosen by API-key callers, and a step's answer can be read back in its
//! execution details, so by default the client reaches only public addresses: a host name is resolved to
//! its public addresses only, and every connection — the first, each redirect's, a proxy's — is checked
//! against the address it actually reached before a byte of the request is sent. A host written as an IP
//! address skips resolution and is refused at that check. `TIDINGS_ALLOW_PRIVATE_NETWORKS=true` turns the
//! guard off (local development and tests).

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::client::legacy::connect::{Connection, HttpInfo};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long a call waits for the remote server.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Redirects followed (each one's connection is checked again).
const MAX_REDIRECTS: usize = 3;

/// The client, refusing non-public addresses unless `allow_private_networks`.
pub fn client(allow_private_networks: bool) -> reqwest::Client {
    build(
        allow_private_networks,
        TIMEOUT,
        reqwest::redirect::Policy::limited(MAX_REDIRECTS),
    )
}

/// How long a webhook's receiver has to answer (Svix's 15 s).
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(15);

/// The client of outbound webhooks: the same guard, a 15 s limit, and no redirect followed (a redirect is
/// a failed attempt, as Svix counts it).
pub fn webhook_client(allow_private_networks: bool) -> reqwest::Client {
    build(
        allow_private_networks,
        WEBHOOK_TIMEOUT,
        reqwest::redirect::Policy::none(),
    )
}

fn build(
    allow_private_networks: bool,
    timeout: Duration,
    redirects: reqwest::redirect::Policy,
) -> reqwest::Client {
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(redirects)
        .user_agent(concat!("tidings/", env!("CARGO_PKG_VERSION")));
    let builder = if allow_private_networks {
        builder
    } else {
        builder
            .dns_resolver(Arc::new(PublicResolver))
            .connector_layer(PublicPeersLayer)
    };
    builder
        .build()
        .expect("the HTTP client configuration is static")
}

/// Why a call failed when the guard refused its address: the text a step's or delivery's detail gives (a
/// permanent failure, not worth a retry); `None` for any other error.
pub fn refusal(error: &reqwest::Error) -> Option<String> {
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused.to_string());
        }
        source = e.source();
    }
    None
}

/// Why a call was not made.
#[derive(Debug)]
enum Refused {
    /// The host name has no public address.
    NoPublicAddress(String),
    /// A connection reached a non-public address (a host written as an address, or a proxy).
    NotPublic,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NoPublicAddress(host) => write!(
                f,
                "{host} has no public address; private, loopback and link-local addresses are refused \
                 unless TIDINGS_ALLOW_PRIVATE_NETWORKS=true"
            ),
            Refused::NotPublic => write!(
                f,
                "the address is not public; private, loopback and link-local addresses are refused \
                 unless TIDINGS_ALLOW_PRIVATE_NETWORKS=true"
            ),
        }
    }
}

impl std::error::Error for Refused {}

/// Resolves a host name as the system does, keeping its public addresses only.
struct PublicResolver;

impl reqwest::dns::Resolve for PublicResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(Box::new(Refused::NoPublicAddress(host)) as BoxError);
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Wraps reqwest's connector with [`PublicPeers`].
#[derive(Clone)]
struct PublicPeersLayer;

impl<S> tower::Layer<S> for PublicPeersLayer {
    type Service = PublicPeers<S>;
    fn layer(&self, inner: S) -> Self::Service {
        PublicPeers(inner)
    }
}

/// A connector that hands out a connection only when its peer address is public.
#[derive(Clone)]
struct PublicPeers<S>(S);

impl<S, R> tower::Service<R> for PublicPeers<S>
where
    S: tower::Service<R, Error = BoxError>,
    S::Response: Connection + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let connecting = self.0.call(req);
        Box::pin(async move {
            let conn = connecting.await?;
            let mut extras = axum::http::Extensions::new();
            conn.connected().get_extras(&mut extras);
            match extras.get::<HttpInfo>() {
                Some(info) if is_public(info.remote_addr().ip()) => Ok(conn),
                _ => Err(Box::new(Refused::NotPublic) as BoxError),
            }
        })
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, shared (CGNAT), link-local,
/// unique-local, multicast, documentation, benchmarking or reserved — for IPv6, also judging the IPv4
/// address a mapped, compatible, NAT64 or 6to4 address carries.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let reserved = a == 0 // "this network", 0.0.0.0/8
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local() // 169.254/16, cloud metadata
        || (a == 100 && (b & 0xc0) == 64) // shared address space 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments 192.0.0/24
        || ip.is_documentation()
        || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18/15
        || a >= 224; // multicast, reserved 240/4, broadcast
    !reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from(((hi as u32) << 16) | lo as u32);
    if s[..6] == [0; 6] && !ip.is_loopback() && !ip.is_unspecified() {
        return is_public_v4(embedded(s[6], s[7])); // IPv4-compatible ::a.b.c.d
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return is_public_v4(embedded(s[6], s[7])); // NAT64 64:ff9b::/96
    }
    if s[0] == 0x2002 {
        return is_public_v4(embedded(s[1], s[2])); // 6to4 2002::/16
    }
    let reserved = ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated)
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation 2001:db8::/32
        || (s[0] == 0x0100 && s[1..4] == [0; 3]); // discard-only 100::/64
    !reserved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_addresses_are_told_from_the_rest() {
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.0",
            "172.32.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public} is public");
        }
        for private in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "192.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
        ] {
            assert!(
                !is_public(private.parse().unwrap()),
                "{private} is not public"
            );
        }
    }
}
