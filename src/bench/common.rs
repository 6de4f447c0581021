//! Options shared by the load-generating subcommands.
