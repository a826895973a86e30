//! Chains compose: running a chain event by event equals running each transform over the
//! whole output of the previous one (what the runtime's per-sink chains rely on).

use proptest::prelude::*;
use sluice_engine::config::{AnchoredRegex, RegexList};
use sluice_engine::{ChangeEvent, Op, Transform};

use crate::testing::*;

fn chain() -> Vec<Box<dyn Transform>> {
    let columns = |p: &str| RegexList(vec![AnchoredRegex::new(p).unwrap()]);
    vec![
        Box::new(crate::mask::build(&crate::mask::MaskConfig {
            columns: columns(r".*\.ssn"),
            chars: Some(2),
            replacement: None,
        })),
        Box::new(crate::truncate::build(&crate::truncate::TruncateConfig {
            columns: columns(r".*\.name"),
            length: 3,
        })),
        Box::new(
            crate::key::Key::new(&crate::key::KeyConfig {
                columns: "public.customers:status".into(),
            })
            .unwrap(),
        ),
        Box::new(crate::unwrap::Unwrap::new(crate::unwrap::UnwrapConfig {
            mode: Some(crate::unwrap::DeleteMode::RewriteWithTombstone),
            legacy_mode: None,
            drop_tombstones: None,
            add_fields: crate::unwrap::FieldList(vec!["op".into()]),
            add_fields_prefix: "__".into(),
            add_headers: crate::unwrap::FieldList(vec![]),
            add_headers_prefix: "__".into(),
        })),
        Box::new(crate::route::Route::new(crate::route::RouteConfig {
            regex: AnchoredRegex::new(r"dbserver1\.(.*)").unwrap(),
            replacement: "x.$1".into(),
        })),
    ]
}

fn events(spec: &[(u8, String)]) -> Vec<ChangeEvent> {
    let s = customers();
    let mut out = Vec::new();
    for (i, (kind, text)) in spec.iter().enumerate() {
        let id = i as i32;
        let r = row(&s, id, Some(text), Some(text), text);
        match kind % 3 {
            0 => out.push(event(&s, Op::Create, None, Some(r))),
            1 => out.push(event(&s, Op::Update, Some(r.clone()), Some(r))),
            _ => {
                let d = event(&s, Op::Delete, Some(r), None);
                out.push(d.clone());
                out.push(tombstone(&d));
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn chains_compose(spec in proptest::collection::vec((0u8..3, ".{0,8}"), 0..12)) {
        let input = events(&spec);
        let mut per_event = Vec::new();
        let mut c = chain();
        for e in input.clone() {
            let mut current = vec![e];
            for t in c.iter_mut() {
                let mut next = Vec::new();
                for e in current {
                    t.apply(e, &mut next).unwrap();
                }
                current = next;
            }
            per_event.extend(current);
        }
        let mut staged = input;
        for t in chain().iter_mut() {
            let mut next = Vec::new();
            for e in staged {
                t.apply(e, &mut next).unwrap();
            }
            staged = next;
        }
        prop_assert_eq!(per_event, staged);
    }
}
