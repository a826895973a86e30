//! Debezium's spatial types, shared by the SQL sources: `io.debezium.data.geometry.Point`
//! (`x`, `y`, `wkb`, `srid`) and `io.debezium.data.geometry.Geometry` (`wkb`, `srid`), with
//! the geometry as well-known binary (WKB).

use std::sync::Arc;

use sluice_engine::{Schema, SchemaType, Struct, Value};

/// `io.debezium.data.geometry.Point`.
pub fn point_schema(optional: bool) -> Arc<Schema> {
    Schema::struct_builder()
        .optional_if(optional)
        .name("io.debezium.data.geometry.Point")
        .version(1)
        .doc("Geometry (POINT)")
        .field("x", Schema::primitive(SchemaType::Float64, false))
        .field("y", Schema::primitive(SchemaType::Float64, false))
        .field("wkb", Schema::primitive(SchemaType::Bytes, true))
        .field("srid", Schema::primitive(SchemaType::Int32, true))
        .build()
}

/// `io.debezium.data.geometry.Geometry`.
pub fn geometry_schema(optional: bool) -> Arc<Schema> {
    Schema::struct_builder()
        .optional_if(optional)
        .name("io.debezium.data.geometry.Geometry")
        .version(1)
        .doc("Geometry")
        .field("wkb", Schema::primitive(SchemaType::Bytes, false))
        .field("srid", Schema::primitive(SchemaType::Int32, true))
        .build()
}

/// A point as well-known binary, as Debezium writes it (little-endian, type 1, no SRID).
pub fn point_wkb(x: f64, y: f64) -> Vec<u8> {
    let mut out = Vec::with_capacity(21);
    out.push(1);
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&x.to_le_bytes());
    out.extend_from_slice(&y.to_le_bytes());
    out
}

/// The coordinates of a WKB point (either byte order); `None` when `wkb` is not a 2D point.
pub fn wkb_point(wkb: &[u8]) -> Option<(f64, f64)> {
    if wkb.len() != 21 {
        return None;
    }
    let little = match wkb[0] {
        1 => true,
        0 => false,
        _ => return None,
    };
    let word: [u8; 4] = wkb.get(1..5)?.try_into().ok()?;
    let kind = if little {
        u32::from_le_bytes(word)
    } else {
        u32::from_be_bytes(word)
    };
    if kind != 1 {
        return None;
    }
    let float = |at: usize| -> Option<f64> {
        let b: [u8; 8] = wkb.get(at..at + 8)?.try_into().ok()?;
        Some(if little {
            f64::from_le_bytes(b)
        } else {
            f64::from_be_bytes(b)
        })
    };
    Some((float(5)?, float(13)?))
}

/// A `Point` value (`schema`: [`point_schema`]) of `wkb`, with `srid` (`None`: unknown).
pub fn point_value(schema: &Arc<Schema>, wkb: Vec<u8>, srid: Option<i32>) -> Option<Value> {
    let (x, y) = wkb_point(&wkb)?;
    let srid = srid.map_or(Value::Null, Value::Int32);
    let values = vec![
        Value::Float64(x),
        Value::Float64(y),
        Value::Bytes(wkb),
        srid,
    ];
    Struct::from_values(schema.clone(), values).map(Value::Struct)
}

/// A `Geometry` value (`schema`: [`geometry_schema`]) of `wkb`, with `srid`.
pub fn geometry_value(schema: &Arc<Schema>, wkb: Vec<u8>, srid: Option<i32>) -> Option<Value> {
    let srid = srid.map_or(Value::Null, Value::Int32);
    Struct::from_values(schema.clone(), vec![Value::Bytes(wkb), srid]).map(Value::Struct)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_go_to_wkb_and_back() {
        let wkb = point_wkb(1.5, -2.25);
        assert_eq!(
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &wkb),
            "AQEAAAAAAAAAAAD4PwAAAAAAAALA"
        );
        assert_eq!(wkb_point(&wkb), Some((1.5, -2.25)));
        // Big-endian: byte order 0.
        let mut be = vec![0, 0, 0, 0, 1];
        be.extend_from_slice(&3.0f64.to_be_bytes());
        be.extend_from_slice(&(-4.0f64).to_be_bytes());
        assert_eq!(wkb_point(&be), Some((3.0, -4.0)));
        // A linestring is no point.
        let mut line = wkb.clone();
        line[1] = 2;
        assert_eq!(wkb_point(&line), None);
        assert_eq!(wkb_point(&wkb[..20]), None);
        let v = point_value(&point_schema(true), wkb, Some(4326));
        let Some(Value::Struct(s)) = v else {
            panic!("no point")
        };
        assert_eq!(s.get("srid"), Some(&Value::Int32(4326)));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_read_without_a_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let _ = wkb_point(&b);
        }
    }
}
