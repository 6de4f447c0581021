//! `[location]`: defaults, modes, errors that name the key, where a relative path points.

use crate::config::Config;

fn load(toml: &str) -> Result<Config, String> {
    Config::from_toml(toml, "herald.toml").map_err(|e| e.to_string())
}

#[test]
fn defaults_modes_and_errors_that_name_the_key() {
    let c = load("").unwrap();
    assert_eq!(c.location.persist_mode(), herald_persist::Mode::WriteBack);
    assert_eq!(c.location.write_back_interval_ms, 1000);
    let c = load("[location]\nmode = \"write-through\"\npath = \"/var/lib/herald/loc.db\"\n").unwrap();
    assert_eq!(c.location.persist_mode(), herald_persist::Mode::WriteThrough);
    assert_eq!(load("[location]\nmode = \"memory\"\n").unwrap().location.persist_mode(), herald_persist::Mode::Memory);
    let e = load("[location]\nmode = \"sometimes\"\n").unwrap_err();
    assert!(e.starts_with("herald.toml:2: key 'location.mode'"), "{e}");
    let e = load("[location]\n\nwrite_back_interval_ms = 0\n").unwrap_err();
    assert!(e.starts_with("herald.toml:3: key 'location.write_back_interval_ms'"), "{e}");
    assert!(load("[location]\ndb_mode = 1\n").unwrap_err().contains("location.db_mode"));
}

#[test]
fn a_relative_path_is_relative_to_the_configuration_file() {
    let dir = std::env::temp_dir().join(format!("herald-location-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("herald.toml");
    let db = |toml: &str| {
        std::fs::write(&file, toml).unwrap();
        Config::load(&file).unwrap().location.database_path(Some(&file))
    };
    assert_eq!(db("[location]\npath = \"state/loc.db\"\n"), dir.join("state/loc.db"));
    assert_eq!(db("[location]\npath = \"/abs/loc.db\"\n"), std::path::Path::new("/abs/loc.db"));
    // No [location]: the default file beside the configuration.
    assert_eq!(db(""), dir.join("herald-location.db"));
    // The built-in configuration: the current directory.
    let builtin = Config::load_or_default(None).unwrap();
    assert_eq!(builtin.location.database_path(None), std::path::Path::new("herald-location.db"));
    std::fs::remove_dir_all(&dir).unwrap();
}
