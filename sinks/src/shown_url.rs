//! URLs as messages and logs show them: without the credentials they may carry.

/// `url` without its `user:password@` part; a comma-separated list of them, each so.
pub(crate) fn shown(url: &str) -> String {
    url.split(',').map(one).collect::<Vec<_>>().join(",")
}

fn one(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn credentials_are_hidden_in_every_server_of_a_list() {
        assert_eq!(shown("https://u:p@h:1/x"), "https://***@h:1/x");
        assert_eq!(
            shown("nats://a:b@h1:4222,nats://h2:4222,tls://t@c@h3"),
            "nats://***@h1:4222,nats://h2:4222,tls://***@h3"
        );
        assert_eq!(shown("nats://h:4222"), "nats://h:4222");
    }
}
