//! `InterProcessNonFairMutex`: one raced ephemeral node per lock path. Exclusion under faults (the
//! one checker: cancellation, expiry, a lost create reply, releases that must not touch a later
//! holder's node) and the hold contract; a release whose outcome is unknown retried after our
//! session re-created the node (layout, re-entrancy, tokens, deadlines, bad input).

mod exclusion_under_faults;
mod hold_contract;
mod release_of_unknown_outcome;
