//! One file per subcommand: its arguments (a clap `Args`) and its `run`. What more than one command
//! uses lives outside this folder (`common`, `connection`, `acquire`, `supervise`), never in a
//! command's file.

pub(crate) mod elect;
pub(crate) mod hold;
pub(crate) mod inspect;
pub(crate) mod lock;
pub(crate) mod participants;
pub(crate) mod register;
pub(crate) mod services;
pub(crate) mod watch;
