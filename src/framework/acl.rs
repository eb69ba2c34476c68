//! ACLs in the crate's own types: [`Acl`], [`Id`], [`Permissions`] (ZooKeeper's `ACL`, `Id` and
//! `ZooDefs.Perms`), with ZooKeeper's usual presets (`ZooDefs.Ids`).

use std::fmt;
use std::ops::{BitOr, BitOrAssign};

use zookeeper_client as zk;

/// A set of ZooKeeper permissions (`ZooDefs.Perms`); combine with `|`.
///
/// ```
/// use zk_curator::Permissions;
///
/// let rw = Permissions::READ | Permissions::WRITE;
/// assert!(rw.contains(Permissions::READ) && !rw.contains(Permissions::DELETE));
/// assert_eq!(rw.to_string(), "rw");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Permissions(u8);

impl Permissions {
    /// No permission.
    pub const NONE: Permissions = Permissions(0);
    /// Read the node's data and list its children.
    pub const READ: Permissions = Permissions(1);
    /// Set the node's data.
    pub const WRITE: Permissions = Permissions(2);
    /// Create children.
    pub const CREATE: Permissions = Permissions(4);
    /// Delete children.
    pub const DELETE: Permissions = Permissions(8);
    /// Set the node's ACL.
    pub const ADMIN: Permissions = Permissions(16);
    /// Every permission.
    pub const ALL: Permissions = Permissions(31);

    /// True when every permission of `other` is in `self`.
    pub fn contains(self, other: Permissions) -> bool {
        self.0 & other.0 == other.0
    }

    /// ZooKeeper's bit mask.
    pub fn bits(self) -> u8 {
        self.0
    }

    /// The set of ZooKeeper's bit mask `bits` (bits beyond [`ALL`](Self::ALL) are dropped).
    pub fn from_bits(bits: u8) -> Permissions {
        Permissions(bits & Self::ALL.0)
    }

    /// Each of our permissions with zookeeper-client's.
    const RAW: [(Permissions, zk::Permission); 5] = [
        (Self::READ, zk::Permission::READ),
        (Self::WRITE, zk::Permission::WRITE),
        (Self::CREATE, zk::Permission::CREATE),
        (Self::DELETE, zk::Permission::DELETE),
        (Self::ADMIN, zk::Permission::ADMIN),
    ];

    fn to_raw(self) -> zk::Permission {
        Self::RAW
            .into_iter()
            .filter(|(ours, _)| self.contains(*ours))
            .fold(zk::Permission::NONE, |all, (_, raw)| all | raw)
    }

    fn of_raw(raw: zk::Permission) -> Permissions {
        Self::RAW.into_iter().filter(|(_, theirs)| raw.has(*theirs)).fold(Self::NONE, |all, (ours, _)| all | ours)
    }
}

impl BitOr for Permissions {
    type Output = Permissions;

    fn bitor(self, rhs: Permissions) -> Permissions {
        Permissions(self.0 | rhs.0)
    }
}

impl BitOrAssign for Permissions {
    fn bitor_assign(&mut self, rhs: Permissions) {
        self.0 |= rhs.0;
    }
}

impl fmt::Display for Permissions {
    /// ZooKeeper's CLI letters (`cdrwa`), in the order r, w, c, d, a.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (perm, letter) in
            [(Self::READ, 'r'), (Self::WRITE, 'w'), (Self::CREATE, 'c'), (Self::DELETE, 'd'), (Self::ADMIN, 'a')]
        {
            if self.contains(perm) {
                f.write_fmt(format_args!("{letter}"))?;
            }
        }
        Ok(())
    }
}

/// An identity an ACL grants to: a scheme (`world`, `auth`, `digest`, `ip`, `sasl`, `x509`, …)
/// and an id in that scheme (ZooKeeper's `Id`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Id {
    scheme: String,
    id: String,
}

impl Id {
    /// The identity `scheme:id`, e.g. `Id::new("sasl", "alice")` or
    /// `Id::new("ip", "10.0.0.0/8")`. For `digest`, `id` is `user:base64(sha1(user:password))`,
    /// as ZooKeeper's `DigestAuthenticationProvider.generateDigest` makes it.
    pub fn new(scheme: impl Into<String>, id: impl Into<String>) -> Id {
        Id { scheme: scheme.into(), id: id.into() }
    }

    /// `world:anyone`: every client (`ZooDefs.Ids.ANYONE_ID_UNSAFE`).
    pub fn anyone() -> Id {
        Id::new("world", "anyone")
    }

    /// `auth:`: every identity the creating client has authenticated as (`ZooDefs.Ids.AUTH_IDS`).
    pub fn authenticated() -> Id {
        Id::new("auth", "")
    }

    /// The scheme.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The id within the scheme.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.scheme, self.id)
    }
}

/// One entry of a node's access control list: `permissions` for `id` (ZooKeeper's `ACL`).
///
/// ```
/// use zk_curator::{Acl, Id, Permissions};
///
/// // Everyone may read; only the authenticated creator may change anything.
/// let acls = vec![Acl::new(Permissions::READ, Id::anyone()), Acl::new(Permissions::ALL, Id::authenticated())];
/// assert_eq!(acls[0].to_string(), "world:anyone:r");
/// assert_eq!(Acl::open_unsafe(), vec![Acl::new(Permissions::ALL, Id::anyone())]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acl {
    permissions: Permissions,
    id: Id,
}

impl Acl {
    /// Grants `permissions` to `id`.
    pub fn new(permissions: Permissions, id: Id) -> Acl {
        Acl { permissions, id }
    }

    /// The permissions granted.
    pub fn permissions(&self) -> Permissions {
        self.permissions
    }

    /// Who they are granted to.
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// Everything to everyone (`ZooDefs.Ids.OPEN_ACL_UNSAFE`), the default of Curator and of
    /// this crate.
    pub fn open_unsafe() -> Vec<Acl> {
        vec![Acl::new(Permissions::ALL, Id::anyone())]
    }

    /// Everything to the creator's authenticated identities (`ZooDefs.Ids.CREATOR_ALL_ACL`); a
    /// create with it fails with `InvalidAcl` from a client that has not authenticated.
    pub fn creator_all() -> Vec<Acl> {
        vec![Acl::new(Permissions::ALL, Id::authenticated())]
    }

    /// Read to everyone (`ZooDefs.Ids.READ_ACL_UNSAFE`).
    pub fn read_unsafe() -> Vec<Acl> {
        vec![Acl::new(Permissions::READ, Id::anyone())]
    }

    pub(crate) fn to_raw(&self) -> zk::Acl {
        zk::Acl::new(self.permissions.to_raw(), zk::AuthId::new(&self.id.scheme, &self.id.id))
    }

    pub(crate) fn of_raw(raw: &zk::Acl) -> Acl {
        Acl::new(Permissions::of_raw(raw.permission()), Id::new(raw.scheme(), raw.id()))
    }
}

impl fmt::Display for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.id, self.permissions)
    }
}

/// zookeeper-client's ACLs of ours.
pub(crate) fn to_raw(acls: &[Acl]) -> Vec<zk::Acl> {
    acls.iter().map(Acl::to_raw).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_round_trip_through_the_raw_type() {
        for bits in 0..=31u8 {
            let ours = Permissions::from_bits(bits);
            assert_eq!(Permissions::of_raw(ours.to_raw()), ours, "bits {bits}");
        }
        let acl = Acl::new(Permissions::READ | Permissions::ADMIN, Id::new("ip", "127.0.0.1"));
        assert_eq!(Acl::of_raw(&acl.to_raw()), acl);
        assert_eq!(acl.to_string(), "ip:127.0.0.1:ra");
    }
}
