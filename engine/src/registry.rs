//! How components register themselves: each source, transform and sink configuration type
//! implements [`Component`] (its `type` name, how its YAML block is read, how it is built), and
//! the binary lists them in one closed enum per role with [`components!`](crate::components),
//! one line each.

use serde::Deserialize;

use crate::component::BuildContext;
use crate::config::{ConfigError, Node, NodeDeserializer};
use crate::error::ComponentError;

/// A component's configuration.
pub trait Component: Sized {
    /// What it builds: `Box<dyn Source>`, `Box<dyn Transform>` or `Box<dyn Sink>`.
    type Built;
    /// Its `type:` value.
    const KIND: &'static str;
    /// Reads the component's block, ignoring the keys in `skip` (the tag and the keys every
    /// component of its role has); errors are located in the file.
    fn from_node(node: &Node, skip: &[&str]) -> Result<Self, ConfigError>;
    /// A fresh instance (called again on every restart), built on the runtime of the stage
    /// that runs it.
    fn build<'a>(
        &'a self,
        ctx: &'a BuildContext<'a>,
    ) -> impl std::future::Future<Output = Result<Self::Built, ComponentError>> + Send + 'a;
}

/// Reads a block as `T` by serde, then runs `check`, whose error is reported at the block: the
/// body of most [`Component::from_node`]s.
pub fn read_checked<'de, T: Deserialize<'de>>(
    node: &Node,
    skip: &[&str],
    check: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, ConfigError> {
    let config = T::deserialize(NodeDeserializer::skipping(node, skip))?;
    check(&config).map_err(|m| ConfigError::at(node.loc, m))?;
    Ok(config)
}

/// Implements [`Component`] for a configuration read by serde and checked by `check` (a
/// `fn(&Self) -> Result<(), String>`), whose `build` body makes the component (`?` and
/// `.await` work in it; it is boxed):
///
/// ```ignore
/// sluice_engine::impl_component!(MaskConfig, Transform, "mask",
///     check = Self::validate, build = |config, _ctx| super::build(config));
/// ```
///
/// With `parts = Shared => field`, the block is read in two parts
/// ([`from_node_parts`](crate::config::from_node_parts)): the configuration's own keys, and
/// `Shared`'s keys (a kit's common options, a sink's format) put into `field`. With
/// `read = path`, the block is read by `path(node, skip)` (a kit's reader that knows more keys).
#[macro_export]
macro_rules! impl_component {
    ($config:ty, $role:ident, $kind:literal, read = $read:path, build = |$c:ident, $ctx:ident| $body:expr) => {
        $crate::impl_component!(@impl $config, $role, $kind,
            read = |node, skip| $read(node, skip),
            build = |$c, $ctx| $body);
    };
    ($config:ty, $role:ident, $kind:literal, parts = $part:ty => $field:ident, check = $check:expr, build = |$c:ident, $ctx:ident| $body:expr) => {
        $crate::impl_component!(@impl $config, $role, $kind,
            read = |node, skip| $crate::registry::read_parts(
                node, skip, |config: &mut $config, part: $part| config.$field = part, $check),
            build = |$c, $ctx| $body);
    };
    ($config:ty, $role:ident, $kind:literal, check = $check:expr, build = |$c:ident, $ctx:ident| $body:expr) => {
        $crate::impl_component!(@impl $config, $role, $kind,
            read = |node, skip| $crate::registry::read_checked(node, skip, $check),
            build = |$c, $ctx| $body);
    };
    (@impl $config:ty, $role:ident, $kind:literal, read = |$node:ident, $skip:ident| $read:expr, build = |$c:ident, $ctx:ident| $body:expr) => {
        impl $crate::registry::Component for $config {
            type Built = Box<dyn $crate::$role>;
            const KIND: &'static str = $kind;
            fn from_node(
                $node: &$crate::config::Node,
                $skip: &[&str],
            ) -> Result<Self, $crate::config::ConfigError> {
                $read
            }
            async fn build<'a>(
                &'a self,
                $ctx: &'a $crate::BuildContext<'a>,
            ) -> Result<Self::Built, $crate::ComponentError> {
                let $c = self;
                Ok(Box::new($body))
            }
        }
    };
}

/// Reads a block in two parts ([`from_node_parts`](crate::config::from_node_parts)), puts the
/// second into the first with `join`, then runs `check`, reported at the block.
pub fn read_parts<'de, T: Deserialize<'de>, P: Deserialize<'de>>(
    node: &Node,
    skip: &[&str],
    join: impl FnOnce(&mut T, P),
    check: impl FnOnce(&T) -> Result<(), String>,
) -> Result<T, ConfigError> {
    let (mut config, part): (T, P) = crate::config::from_node_parts(node, skip)?;
    join(&mut config, part);
    check(&config).map_err(|m| ConfigError::at(node.loc, m))?;
    Ok(config)
}

/// Accepts every configuration serde reads (for [`impl_component!`](crate::impl_component)'s `check`).
pub fn unchecked<T>(_: &T) -> Result<(), String> {
    Ok(())
}

/// The closed enum of one role's components, with its [`ComponentSpec`](crate::config::ComponentSpec)
/// and build trait: one line per component, which may carry attributes such as
/// `#[cfg(feature = "kafka")]`.
///
/// ```ignore
/// sluice_engine::components! {
///     /// `source:` kinds.
///     pub enum SourceSpec: "source", BuildSource, Source {
///         Datagen(DatagenConfig),
///         #[cfg(feature = "postgres")]
///         Postgres(PostgresConfig),
///     }
///     // The kinds a build may leave out, with the feature that brings each in: a pipeline
///     // naming one is told so instead of "unknown type".
///     not built {
///         #[cfg(not(feature = "postgres"))]
///         "postgres" => "postgres",
///     }
/// }
/// ```
#[macro_export]
macro_rules! components {
    (
        $(#[$doc:meta])*
        $vis:vis enum $name:ident: $role:literal, $build:ident, $trait:ident {
            $( $(#[$attr:meta])* $variant:ident($config:ty), )+
        }
    ) => {
        $crate::components! {
            $(#[$doc])*
            $vis enum $name: $role, $build, $trait {
                $( $(#[$attr])* $variant($config), )+
            }
            not built {}
        }
    };
    (
        $(#[$doc:meta])*
        $vis:vis enum $name:ident: $role:literal, $build:ident, $trait:ident {
            $( $(#[$attr:meta])* $variant:ident($config:ty), )+
        }
        not built {
            $( $(#[$absent_attr:meta])* $absent:literal => $feature:literal, )*
        }
    ) => {
        $(#[$doc])*
        #[derive(Debug, Clone)]
        $vis enum $name {
            $( $(#[$attr])* #[doc = concat!("`type: ", stringify!($variant), "`.")] $variant(Box<$config>), )+
        }

        impl $crate::config::ComponentSpec for $name {
            const ROLE: &'static str = $role;
            const KINDS: &'static [&'static str] = &[
                $( $(#[$attr])* <$config as $crate::registry::Component>::KIND, )+
            ];
            const NOT_BUILT: &'static [(&'static str, &'static str)] = &[
                $( $(#[$absent_attr])* ($absent, $feature), )*
            ];
            fn from_node(
                kind: &str,
                node: &$crate::config::Node,
                skip: &[&str],
            ) -> Result<Option<Self>, $crate::config::ConfigError> {
                $(
                    $(#[$attr])*
                    if kind == <$config as $crate::registry::Component>::KIND {
                        let config = <$config as $crate::registry::Component>::from_node(node, skip)?;
                        return Ok(Some($name::$variant(Box::new(config))));
                    }
                )+
                Ok(None)
            }
        }

        #[$crate::async_trait]
        impl $crate::$build for $name {
            async fn build(
                &self,
                ctx: &$crate::BuildContext<'_>,
            ) -> Result<Box<dyn $crate::$trait>, $crate::ComponentError> {
                match self {
                    $( $(#[$attr])* $name::$variant(c) => $crate::registry::Component::build(&**c, ctx).await, )+
                }
            }
        }
    };
}
