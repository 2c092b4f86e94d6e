//! Integers as JSON Schema counts them, for serde: `738`, `738.0` and
//! `"738"` are the same integer, so a field a document declares `integer`
//! takes each of them; a fraction, or a value out of the field's range, is
//! refused naming the field (through serde's path). It owns only this
//! reading of a number; what range a value must lie in is the rules'.
//!
//! Use it as `#[serde(deserialize_with = "leasehold_host::whole::u32")]`,
//! or the `opt_*` readers with `#[serde(default)]` for an optional field
//! (absent or `null` is `None`).

use serde::de::{self, Deserializer, Visitor};

struct Whole;

impl Visitor<'_> for Whole {
    type Value = i128;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an integer")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i128, E> {
        Ok(i128::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i128, E> {
        // Exact below 2^53, which covers every bound the rules have.
        if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
            Ok(v as i128)
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<i128, E> {
        if let Ok(n) = v.parse::<i128>() {
            return Ok(n);
        }
        match v.parse::<f64>() {
            Ok(f) if f.is_finite() => self.visit_f64(f),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

fn whole<'de, D: Deserializer<'de>, T: TryFrom<i128>>(d: D) -> Result<T, D::Error> {
    let n = d.deserialize_any(Whole)?;
    T::try_from(n).map_err(|_| {
        de::Error::invalid_value(de::Unexpected::Other("an integer out of range"), &Whole)
    })
}

/// A `u32`.
pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    whole(d)
}

/// An `i64`.
pub fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    whole(d)
}

/// A `u64` (a task's reminder offsets and chain steps).
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    whole(d)
}

struct Maybe<T>(std::marker::PhantomData<T>);

impl<'de, T: TryFrom<i128>> Visitor<'de> for Maybe<T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an integer or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        whole(d).map(Some)
    }
}

/// A `u32`, or `None` for `null`.
pub fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    d.deserialize_option(Maybe(std::marker::PhantomData))
}

/// An `i64`, or `None` for `null`.
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    d.deserialize_option(Maybe(std::marker::PhantomData))
}

/// A `u64`, or `None` for `null`.
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    d.deserialize_option(Maybe(std::marker::PhantomData))
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    struct Both {
        #[serde(deserialize_with = "super::u32")]
        n: u32,
        #[serde(default, deserialize_with = "super::opt_i64")]
        at: Option<i64>,
    }

    fn read(text: &str) -> Result<Both, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn an_integer_may_be_written_as_a_whole_float_or_a_string() {
        for text in [
            r#"{"n": 7, "at": -5}"#,
            r#"{"n": 7.0, "at": -5.0}"#,
            r#"{"n": "7", "at": "-5"}"#,
        ] {
            let b = read(text).expect(text);
            assert_eq!((b.n, b.at), (7, Some(-5)), "{text}");
        }
        assert_eq!(read(r#"{"n": 1}"#).expect("absent").at, None);
        assert_eq!(read(r#"{"n": 1, "at": null}"#).expect("null").at, None);
    }

    #[test]
    fn a_fraction_or_a_value_out_of_range_is_refused() {
        for text in [
            r#"{"n": 7.5}"#,
            r#"{"n": -1}"#,
            r#"{"n": 4294967296}"#,
            r#"{"n": "seven"}"#,
            r#"{"n": 1, "at": 1e300}"#,
        ] {
            assert!(read(text).is_err(), "{text}");
        }
    }
}
