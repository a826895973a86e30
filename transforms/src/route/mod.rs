//! `route`: rename topics by regex (RegexRouter).

mod config;

use std::sync::Arc;

use sluice_engine::{ChangeEvent, ComponentError, Transform};

pub use config::RouteConfig;

/// The running route transform.
#[derive(Debug, Clone)]
pub struct Route {
    config: RouteConfig,
    /// The last topic seen and its routed name: events of one table come in runs.
    last: Option<(Arc<str>, Arc<str>)>,
}

impl Route {
    /// A router for `config`.
    pub fn new(config: RouteConfig) -> Self {
        Route { config, last: None }
    }

    fn route(&mut self, topic: &Arc<str>) -> Arc<str> {
        if let Some((from, to)) = &self.last {
            if Arc::ptr_eq(from, topic) || **from == **topic {
                return to.clone();
            }
        }
        let regex = self.config.regex.regex();
        let routed: Arc<str> = match regex.captures(topic) {
            Some(caps) => {
                let mut out = String::new();
                let replacement = crate::envelope::java_replacement(
                    &self.config.replacement,
                    regex.captures_len(),
                );
                caps.expand(&replacement, &mut out);
                out.into()
            }
            None => topic.clone(),
        };
        self.last = Some((topic.clone(), routed.clone()));
        routed
    }
}

impl Transform for Route {
    fn apply(
        &mut self,
        mut event: ChangeEvent,
        out: &mut Vec<ChangeEvent>,
    ) -> Result<(), ComponentError> {
        event.topic = self.route(&event.topic);
        out.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_engine::config::AnchoredRegex;
    use sluice_engine::Position;

    fn event(topic: &str) -> ChangeEvent {
        ChangeEvent {
            topic: topic.into(),
            key: None,
            value: None,
            headers: Vec::new(),
            position: Position::Offset(1),
        }
    }

    fn router(regex: &str, replacement: &str) -> Option<Route> {
        Some(Route::new(RouteConfig {
            regex: AnchoredRegex::new(regex).ok()?,
            replacement: replacement.to_owned(),
        }))
    }

    #[test]
    fn groups_are_substituted_and_other_topics_kept() -> Result<(), ComponentError> {
        let mut r = router(r"dbserver1\.public\.(.*)", "cdc.$1")
            .ok_or_else(|| ComponentError::fatal("regex"))?;
        let mut out = Vec::new();
        r.apply(event("dbserver1.public.customers"), &mut out)?;
        r.apply(event("other.topic"), &mut out)?;
        r.apply(event("dbserver1.public.orders"), &mut out)?;
        let topics: Vec<&str> = out.iter().map(|e| &*e.topic).collect();
        assert_eq!(topics, vec!["cdc.customers", "other.topic", "cdc.orders"]);
        Ok(())
    }

    proptest! {
        #[test]
        fn a_match_all_identity_route_changes_nothing(topic in "[a-z._-]{1,30}") {
            let mut r = router("(.*)", "$1").ok_or_else(|| TestCaseError::fail("regex"))?;
            let mut out = Vec::new();
            r.apply(event(&topic), &mut out).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(&*out[0].topic, topic.as_str());
        }
    }
}
