//! JSON values as JSON Schema sees them: type names, exact number order,
//! `multipleOf` in decimal, and a canonical encoding for equality.
//!
//! Owns the arithmetic the keywords rest on; it must never recurse on a
//! value, since an instance may nest as deep as its parser allowed.

#[allow(unused_imports)]
use crate::prelude::*;

use core::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// The positions `0..len` in the order `cmp` puts them. Every sort of the
/// module goes through this one function, so the component links one sort
/// routine rather than one for each type sorted.
pub fn sorted_positions(len: usize, cmp: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut positions: Vec<usize> = (0..len).collect();
    positions.sort_unstable_by(|a, b| cmp(*a, *b));
    positions
}

/// An object's members in byte order of their names. serde_json keeps them
/// so unless a build enables its `preserve_order`; then they are sorted here.
pub fn members_in_order(members: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let entries: Vec<(&String, &Value)> = members.iter().collect();
    if entries.is_sorted_by(|a, b| a.0 <= b.0) {
        return entries;
    }
    sorted_positions(entries.len(), &|a, b| entries[a].0.cmp(entries[b].0))
        .into_iter()
        .map(|i| entries[i])
        .collect()
}

/// The type name JSON Schema gives `value`, `integer` for a number with no
/// fractional part (the spec counts `1.0` as an integer).
pub fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if is_integer(n) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub fn is_integer(n: &Number) -> bool {
    match Num::of(n) {
        Num::Int(_) => true,
        Num::Float(f) => f.is_finite() && float_fraction(f) == Some(0.0),
    }
}

/// A number without loss: serde_json holds `u64`, `i64` or `f64`, and all
/// integers of the first two fit an `i128`.
#[derive(Clone, Copy, Debug)]
pub enum Num {
    Int(i128),
    Float(f64),
}

/// 2^127: every finite `f64` below it in magnitude truncates into an `i128`.
const I128_LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;

impl Num {
    pub fn of(n: &Number) -> Num {
        if let Some(u) = n.as_u64() {
            Num::Int(i128::from(u))
        } else if let Some(i) = n.as_i64() {
            Num::Int(i128::from(i))
        } else {
            // Without `arbitrary_precision` every other number is an f64.
            Num::Float(n.as_f64().unwrap_or(f64::NAN))
        }
    }

    /// The order of the numbers' exact values (no rounding through `f64`).
    pub fn cmp(self, other: Num) -> Ordering {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a.cmp(&b),
            (Num::Float(a), Num::Float(b)) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
            (Num::Float(f), Num::Int(i)) => float_against_int(f, i),
            (Num::Int(i), Num::Float(f)) => float_against_int(f, i).reverse(),
        }
    }
}

/// `f - trunc(f)`, exact; `None` for a float that is not finite.
fn float_fraction(f: f64) -> Option<f64> {
    if !f.is_finite() {
        return None;
    }
    if f.abs() >= I128_LIMIT {
        return Some(0.0);
    }
    // `as` truncates toward zero, exactly, in this range; so does the way back.
    let t = f as i128;
    Some(f - t as f64)
}

fn float_against_int(f: f64, i: i128) -> Ordering {
    if f.is_nan() {
        return Ordering::Equal;
    }
    if f >= I128_LIMIT {
        return Ordering::Greater;
    }
    if f < -I128_LIMIT {
        return Ordering::Less;
    }
    let t = f as i128;
    match t.cmp(&i) {
        Ordering::Equal => (f - t as f64).partial_cmp(&0.0).unwrap_or(Ordering::Equal),
        other => other,
    }
}

/// A number as the decimal `digits × 10^exp`, read from the shortest
/// decimal that round-trips it: the number its author wrote, whenever it
/// had no more significant digits than an `f64` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal {
    digits: u128,
    exp: i32,
}

impl Decimal {
    /// `None` for a number that is not finite (serde_json never makes one).
    pub fn of(n: &Number) -> Option<Decimal> {
        let mut d = match Num::of(n) {
            Num::Int(i) => Decimal {
                digits: i.unsigned_abs(),
                exp: 0,
            },
            Num::Float(f) if f.is_finite() => parse_decimal(&n.to_string())?,
            Num::Float(_) => return None,
        };
        while d.digits != 0 && d.digits % 10 == 0 {
            d.digits /= 10;
            d.exp += 1;
        }
        Some(d)
    }

    pub fn is_zero(self) -> bool {
        self.digits == 0
    }

    /// Whether `self / divisor` is an integer, exactly. `divisor` is not 0.
    pub fn is_multiple_of(self, divisor: Decimal) -> bool {
        if self.digits == 0 {
            return true;
        }
        if divisor.digits == 0 {
            return false;
        }
        let shift = self.exp - divisor.exp;
        if shift >= 0 {
            // self.digits × 10^shift mod divisor.digits, a digit at a time:
            // at most some 650 steps between the extremes of an f64.
            let mut rest = self.digits % divisor.digits;
            for _ in 0..shift {
                if rest == 0 {
                    break;
                }
                rest = rest * 10 % divisor.digits;
            }
            rest == 0
        } else {
            // divisor.digits × 10^-shift must divide self.digits, which it
            // cannot once it is larger.
            let scaled = u32::try_from(-shift)
                .ok()
                .and_then(|s| 10u128.checked_pow(s))
                .and_then(|p| p.checked_mul(divisor.digits));
            scaled.is_some_and(|d| d <= self.digits && self.digits.is_multiple_of(d))
        }
    }
}

/// A decimal as serde_json writes a finite float (its shortest round-trip
/// digits: `0.0075`, `1e300`, `1.5e-7`), sign dropped.
fn parse_decimal(text: &str) -> Option<Decimal> {
    let text = text.strip_prefix('-').unwrap_or(text);
    let (mantissa, exp) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], text[at + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (whole, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: u128 = 0;
    for c in whole.chars().chain(frac.chars()) {
        digits = digits
            .checked_mul(10)?
            .checked_add(u128::from(c.to_digit(10)?))?;
    }
    let exp = exp.checked_sub(i32::try_from(frac.len()).ok()?)?;
    Some(Decimal { digits, exp })
}

/// `value` written so that two values are equal under JSON Schema (numbers
/// by value, so `1` and `1.0`; objects whatever their members' order) when,
/// and only when, their encodings are equal. Iterative: no recursion on the
/// value's depth.
pub fn canonical(value: &Value) -> Vec<u8> {
    enum Step<'a> {
        Value(&'a Value),
        Key(&'a str),
        Close(u8),
    }
    let mut out = Vec::new();
    let mut stack = vec![Step::Value(value)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Close(c) => out.push(c),
            Step::Key(k) => string(&mut out, k),
            Step::Value(Value::Null) => out.push(b'z'),
            Step::Value(Value::Bool(true)) => out.push(b't'),
            Step::Value(Value::Bool(false)) => out.push(b'f'),
            Step::Value(Value::Number(n)) => number(&mut out, n),
            Step::Value(Value::String(s)) => string(&mut out, s),
            Step::Value(Value::Array(items)) => {
                out.push(b'[');
                stack.push(Step::Close(b']'));
                stack.extend(items.iter().rev().map(Step::Value));
            }
            Step::Value(Value::Object(members)) => {
                out.push(b'{');
                stack.push(Step::Close(b'}'));
                for (k, v) in members_in_order(members).into_iter().rev() {
                    stack.push(Step::Value(v));
                    stack.push(Step::Key(k));
                }
            }
        }
    }
    out
}

/// A string, length first so that no byte of it needs escaping.
fn string(out: &mut Vec<u8>, s: &str) {
    out.push(b's');
    out.extend_from_slice(s.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(s.as_bytes());
}

/// An integral value as its exact decimal integer, whatever it was stored
/// as; any other as serde_json writes it, the shortest decimal that
/// round-trips, one spelling per value. None of the characters
/// `-+.0123456789e` is a type tag, so a number ends where the next tag
/// begins.
fn number(out: &mut Vec<u8>, n: &Number) {
    out.push(b'n');
    let text = match Num::of(n) {
        Num::Int(i) => i.to_string(),
        Num::Float(f) if f.abs() < I128_LIMIT && float_fraction(f) == Some(0.0) => {
            // -0.0 becomes 0 here, equal to 0 as the spec has it.
            (f as i128).to_string()
        }
        Num::Float(_) => n.to_string(),
    };
    out.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn num(v: Value) -> Num {
        match v {
            Value::Number(n) => Num::of(&n),
            _ => Num::Int(0),
        }
    }

    fn dec(v: Value) -> Decimal {
        match v {
            Value::Number(n) => Decimal::of(&n).unwrap_or(Decimal { digits: 0, exp: 0 }),
            _ => Decimal { digits: 0, exp: 0 },
        }
    }

    #[test]
    fn numbers_compare_by_exact_value_across_representations() {
        assert_eq!(num(json!(1)).cmp(num(json!(1.0))), Ordering::Equal);
        assert_eq!(num(json!(-1)).cmp(num(json!(-0.5))), Ordering::Less);
        assert_eq!(num(json!(2)).cmp(num(json!(1.5))), Ordering::Greater);
        // 2^53 + 1 has no f64: the integer is above the float 2^53.
        let big = json!(9_007_199_254_740_993u64);
        assert_eq!(
            num(big).cmp(num(json!(9_007_199_254_740_992.0))),
            Ordering::Greater
        );
        assert_eq!(num(json!(u64::MAX)).cmp(num(json!(1e300))), Ordering::Less);
        assert_eq!(
            num(json!(i64::MIN)).cmp(num(json!(-1e300))),
            Ordering::Greater
        );
    }

    #[test]
    fn multiple_of_is_decided_in_decimal() {
        assert!(dec(json!(19.99)).is_multiple_of(dec(json!(0.01))));
        assert!(dec(json!(0.0075)).is_multiple_of(dec(json!(0.0001))));
        assert!(!dec(json!(0.00751)).is_multiple_of(dec(json!(0.0001))));
        assert!(dec(json!(-4.5)).is_multiple_of(dec(json!(1.5))));
        assert!(!dec(json!(35)).is_multiple_of(dec(json!(1.5))));
        assert!(!dec(json!(1e308)).is_multiple_of(dec(json!(0.123456789))));
        assert!(dec(json!(1e308)).is_multiple_of(dec(json!(5e-324))));
        assert!(dec(json!(0)).is_multiple_of(dec(json!(7))));
        assert!(dec(json!(u64::MAX)).is_multiple_of(dec(json!(5))));
        assert!(!dec(json!(1)).is_multiple_of(dec(json!(1e30))));
    }

    #[test]
    fn canonical_encoding_equates_what_json_schema_equates() {
        let same = |a: Value, b: Value| canonical(&a) == canonical(&b);
        assert!(same(json!(1), json!(1.0)));
        assert!(same(json!(0), json!(-0.0)));
        assert!(same(
            json!({"a": 1, "b": [2.0]}),
            json!({"b": [2], "a": 1.0})
        ));
        assert!(!same(json!(1), json!(true)));
        assert!(!same(json!(0), json!(false)));
        assert!(!same(json!([]), json!({})));
        assert!(!same(json!("1"), json!(1)));
        assert!(!same(json!(["a", "b"]), json!(["ab"])));
        assert!(!same(json!([1, 2]), json!([12])));
        assert!(!same(json!(1.5), json!(15)));
        assert!(!same(
            json!(9_007_199_254_740_993u64),
            json!(9_007_199_254_740_992.0)
        ));
    }

    #[test]
    fn canonical_encoding_does_not_recurse() {
        let mut deep = json!(0);
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        assert_eq!(canonical(&deep).len(), 200_002);
        // serde_json drops a Value recursively; unwind it by hand.
        while let Value::Array(mut a) = deep {
            deep = a.pop().unwrap_or(Value::Null);
        }
    }
}
