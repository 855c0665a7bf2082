//! The RUBiS bidding mix (UniStore §8.1): an auction site's 11 read-only and 5 update
//! transactions plus `closeAuction`, with the conflict relation of UniStore (after Red-Blue,
//! ref. [42] there): registerUser with registerUser (same nickname), storeBuyNow with
//! storeBuyNow (same item), storeBid with closeAuction (same item). Those four are strong;
//! everything else is causal.
//!
//! Tables are key prefixes; rows are split into one object per field so that each field
//! gets the CRDT its updates need:
//! - `users/<u>/name` LWW (registerUser claims the nickname `u`), `users/<u>/rating`
//!   counter, `users/<u>/comments`, `users/<u>/bids`, `users/<u>/bought` sets of ids;
//! - `items/<i>/info` LWW (registerItem), `items/<i>/max_bid` LWW, `items/<i>/nb_bids`
//!   counter, `items/<i>/bids` set of bid ids, `items/<i>/quantity` counter,
//!   `items/<i>/closed` LWW;
//! - `bids/<n>`, `buynow/<n>`, `comments/<n>` LWW records, one per new row;
//! - `regions/<r>/items`, `categories/<c>/items` sets of item ids (the search indexes),
//!   `regions/index`, `categories/index` sets (the browse pages).
//!
//! Sizes (`--rubis-scale N`): 100 N users, 500 N items; 62 regions and 20 categories as in
//! the RUBiS database specification. Item `i` is in region `i % 62` and category `i % 20`.
//! Users and items are drawn uniformly (RUBiS picks them at random), through the
//! `KeyPicker`'s homes when `--remote-ratio` is set. Nothing is preloaded: a row exists
//! once a transaction wrote it, and the final reads cover only keys some plan touched.

use super::{KeyPicker, Step, TxnPlan, Values};
use crate::rng::SimRng;
use causeway_core::crdt::{ObjType, Update};
use causeway_core::{Key, TxnKind};
use std::collections::BTreeMap;

/// RUBiS's 62 regions (US states and more) and 20 categories.
const REGIONS: u32 = 62;
const CATEGORIES: u32 = 20;
/// Items listed on a search page that the page reads.
const SEARCH_PAGE_ITEMS: u32 = 3;

/// The transactions of the bidding mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RubisTxn {
    BrowseCategories,
    BrowseRegions,
    SearchItemsByCategory,
    SearchItemsByRegion,
    ViewItem,
    ViewUserInfo,
    ViewBidHistory,
    BuyNow,
    PutBid,
    PutComment,
    AboutMe,
    RegisterUser,
    RegisterItem,
    StoreBuyNow,
    StoreBid,
    StoreComment,
    CloseAuction,
}

/// Percent of transactions of each type. UniStore §8.1 fixes the totals only: the bidding
/// mix with 15% update transactions, 10% strong ones. The split within follows the RUBiS
/// bidding mix (RUBiS 1.4 `default_bidding_transitions`, whose steady state is dominated
/// by item views, searches and bid forms); it is our approximation, not a published table.
/// Read-only 85: 5+3+15+6+22+5+4+3+12+2+8. Strong 10: 1+2+6+1. Causal updates 5: 3+2.
pub const BIDDING_MIX: [(RubisTxn, u32); 17] = [
    (RubisTxn::BrowseCategories, 5),
    (RubisTxn::BrowseRegions, 3),
    (RubisTxn::SearchItemsByCategory, 15),
    (RubisTxn::SearchItemsByRegion, 6),
    (RubisTxn::ViewItem, 22),
    (RubisTxn::ViewUserInfo, 5),
    (RubisTxn::ViewBidHistory, 4),
    (RubisTxn::BuyNow, 3),
    (RubisTxn::PutBid, 12),
    (RubisTxn::PutComment, 2),
    (RubisTxn::AboutMe, 8),
    (RubisTxn::RegisterUser, 1),
    (RubisTxn::RegisterItem, 3),
    (RubisTxn::StoreBuyNow, 2),
    (RubisTxn::StoreBid, 6),
    (RubisTxn::StoreComment, 2),
    (RubisTxn::CloseAuction, 1),
];

impl RubisTxn {
    /// Strong per the conflict relation: each of these conflicts with itself or another.
    pub fn is_strong(self) -> bool {
        matches!(
            self,
            RubisTxn::RegisterUser
                | RubisTxn::StoreBuyNow
                | RubisTxn::StoreBid
                | RubisTxn::CloseAuction
        )
    }

    pub fn is_read_only(self) -> bool {
        self < RubisTxn::RegisterUser
    }

    pub fn name(self) -> &'static str {
        match self {
            RubisTxn::BrowseCategories => "browseCategories",
            RubisTxn::BrowseRegions => "browseRegions",
            RubisTxn::SearchItemsByCategory => "searchItemsByCategory",
            RubisTxn::SearchItemsByRegion => "searchItemsByRegion",
            RubisTxn::ViewItem => "viewItem",
            RubisTxn::ViewUserInfo => "viewUserInfo",
            RubisTxn::ViewBidHistory => "viewBidHistory",
            RubisTxn::BuyNow => "buyNow",
            RubisTxn::PutBid => "putBid",
            RubisTxn::PutComment => "putComment",
            RubisTxn::AboutMe => "aboutMe",
            RubisTxn::RegisterUser => "registerUser",
            RubisTxn::RegisterItem => "registerItem",
            RubisTxn::StoreBuyNow => "storeBuyNow",
            RubisTxn::StoreBid => "storeBid",
            RubisTxn::StoreComment => "storeComment",
            RubisTxn::CloseAuction => "closeAuction",
        }
    }

    /// The type whose share of the mix holds `percent` (in `0..100`).
    fn of_percent(percent: u32) -> RubisTxn {
        let mut bound = 0;
        for (txn, share) in BIDDING_MIX {
            bound += share;
            if percent < bound {
                return txn;
            }
        }
        RubisTxn::ViewItem
    }
}

pub(crate) struct Rubis {
    users: u32,
    items: u32,
    /// Ids of new bids, buy-now records and comments (one sequence for all).
    next_row: u64,
    /// Every key a plan named, with its type, for the final reads.
    touched: BTreeMap<Key, ObjType>,
}

/// A transaction under construction: its steps, reads grouped into one request per page.
struct Builder<'a> {
    rubis: &'a mut Rubis,
    steps: Vec<Step>,
}

impl Builder<'_> {
    /// One request reading `keys` (a page view reads its rows together).
    fn read(&mut self, keys: &[(String, ObjType)]) {
        let mut many: Vec<(Key, ObjType)> = Vec::new();
        for (name, obj) in keys {
            let key = self.rubis.touch(name, *obj);
            if !many.iter().any(|(k, _)| *k == key) {
                many.push((key, *obj));
            }
        }
        self.steps.push(match many.len() {
            1 => Step::Read(many[0].0.clone(), many[0].1),
            _ => Step::ReadMany(many),
        });
    }

    fn update(&mut self, name: &str, update: Update) {
        let key = self.rubis.touch(name, update.obj_type());
        self.steps.push(Step::Update(key, update));
    }

    fn add(&mut self, name: &str, element: &str) {
        self.update(name, Update::Add(element.as_bytes().to_vec()));
    }
}

impl Rubis {
    pub(crate) fn new(scale: u32) -> Rubis {
        Rubis {
            users: 100 * scale,
            items: 500 * scale,
            next_row: 0,
            touched: BTreeMap::new(),
        }
    }

    fn touch(&mut self, name: &str, obj: ObjType) -> Key {
        let key = Key::new(name.to_string());
        self.touched.insert(key.clone(), obj);
        key
    }

    pub(crate) fn touched_keys(&self) -> Vec<(Key, ObjType)> {
        self.touched.iter().map(|(k, t)| (k.clone(), *t)).collect()
    }

    fn new_row(&mut self) -> u64 {
        self.next_row += 1;
        self.next_row
    }

    pub(crate) fn plan(
        &mut self,
        dc: u16,
        picker: &KeyPicker,
        values: &mut Values,
        rng: &mut SimRng,
    ) -> TxnPlan {
        let txn = RubisTxn::of_percent(rng.range(0, 100) as u32);
        let (users, items) = (self.users, self.items);
        let mut ctx = Ctx {
            user: picker.pick_uniform(users, dc, rng),
            item: picker.pick_uniform(items, dc, rng),
            rng,
            values,
        };
        let mut b = Builder {
            rubis: self,
            steps: Vec::new(),
        };
        if txn.is_read_only() {
            page(txn, &mut b, &mut ctx, users, items);
        } else {
            store(txn, &mut b, &mut ctx, users);
        }
        let kind = if txn.is_strong() {
            TxnKind::Strong
        } else {
            TxnKind::Causal
        };
        TxnPlan {
            kind,
            steps: b.steps,
            name: txn.name(),
        }
    }
}

/// What a transaction acts on: the user and item drawn for it, and the draws still to come.
struct Ctx<'a> {
    user: u32,
    item: u32,
    rng: &'a mut SimRng,
    values: &'a mut Values,
}

fn user(u: u32, field: &str) -> (String, ObjType) {
    let obj = match field {
        "name" => ObjType::Lww,
        "rating" => ObjType::Counter,
        _ => ObjType::Set,
    };
    (format!("users/{u}/{field}"), obj)
}

fn item(i: u32, field: &str) -> (String, ObjType) {
    let obj = match field {
        "bids" => ObjType::Set,
        "nb_bids" | "quantity" => ObjType::Counter,
        _ => ObjType::Lww,
    };
    (format!("items/{i}/{field}"), obj)
}

/// The read-only transactions: one page view each, reading its rows in one request (or
/// two, when the page first reads an index or authenticates its user).
fn page(txn: RubisTxn, b: &mut Builder, ctx: &mut Ctx, users: u32, items: u32) {
    let (u, i) = (ctx.user, ctx.item);
    match txn {
        RubisTxn::BrowseCategories => b.read(&[("categories/index".into(), ObjType::Set)]),
        RubisTxn::BrowseRegions => b.read(&[("regions/index".into(), ObjType::Set)]),
        RubisTxn::SearchItemsByCategory => search(b, ctx, "categories", CATEGORIES, items),
        RubisTxn::SearchItemsByRegion => search(b, ctx, "regions", REGIONS, items),
        RubisTxn::ViewItem => {
            let fields = ["info", "max_bid", "nb_bids", "quantity", "closed"];
            b.read(&fields.map(|f| item(i, f)));
        }
        RubisTxn::ViewUserInfo => b.read(&["name", "rating", "comments"].map(|f| user(u, f))),
        RubisTxn::ViewBidHistory => b.read(&[item(i, "info"), item(i, "bids")]),
        RubisTxn::BuyNow => {
            b.read(&[user(u, "name")]);
            b.read(&[item(i, "info"), item(i, "quantity")]);
        }
        RubisTxn::PutBid => {
            b.read(&[user(u, "name")]);
            b.read(&["info", "max_bid", "nb_bids"].map(|f| item(i, f)));
        }
        RubisTxn::PutComment => {
            let to = ctx.rng.range(0, u64::from(users)) as u32;
            b.read(&[user(u, "name")]);
            b.read(&[user(to, "name"), item(i, "info")]);
        }
        RubisTxn::AboutMe => {
            b.read(&[user(u, "name")]);
            b.read(&["rating", "comments", "bids", "bought"].map(|f| user(u, f)));
        }
        _ => unreachable!("{txn:?} updates"),
    }
}

/// A search page: the index of one region or category, then a page of its items.
fn search(b: &mut Builder, ctx: &mut Ctx, table: &str, groups: u32, items: u32) {
    let group = ctx.rng.range(0, u64::from(groups)) as u32;
    b.read(&[(format!("{table}/{group}/items"), ObjType::Set)]);
    // Items of group g are g, g + groups, ...: the page shows some of them.
    let per_group = (items - group).div_ceil(groups);
    let mut rows = Vec::new();
    for _ in 0..SEARCH_PAGE_ITEMS {
        let i = group + groups * ctx.rng.range(0, u64::from(per_group)) as u32;
        rows.extend([item(i, "info"), item(i, "max_bid")]);
    }
    b.read(&rows);
}

/// The update transactions: each reads what its checks need, then writes its rows.
fn store(txn: RubisTxn, b: &mut Builder, ctx: &mut Ctx, users: u32) {
    let (u, i) = (ctx.user, ctx.item);
    match txn {
        RubisTxn::RegisterUser => {
            // Strong: two registrations of nickname `u` conflict.
            b.read(&[user(u, "name")]);
            b.update(&user(u, "name").0, Update::Assign(ctx.values.next()));
        }
        RubisTxn::RegisterItem => register_item(b, ctx),
        RubisTxn::StoreBuyNow => {
            b.read(&[item(i, "quantity"), item(i, "closed")]);
            let n = b.rubis.new_row();
            b.update(&format!("buynow/{n}"), Update::Assign(ctx.values.next()));
            b.update(&item(i, "quantity").0, Update::Increment(-1));
            b.add(&user(u, "bought").0, &format!("n{n}"));
        }
        RubisTxn::StoreBid => {
            b.read(&[item(i, "closed"), item(i, "max_bid")]);
            let n = b.rubis.new_row();
            b.update(&format!("bids/{n}"), Update::Assign(ctx.values.next()));
            b.add(&item(i, "bids").0, &format!("b{n}"));
            b.update(&item(i, "nb_bids").0, Update::Increment(1));
            b.update(&item(i, "max_bid").0, Update::Assign(ctx.values.next()));
            b.add(&user(u, "bids").0, &format!("b{n}"));
        }
        RubisTxn::StoreComment => {
            let to = ctx.rng.range(0, u64::from(users)) as u32;
            let n = b.rubis.new_row();
            b.update(&format!("comments/{n}"), Update::Assign(ctx.values.next()));
            b.add(&user(to, "comments").0, &format!("c{n}"));
            // RUBiS ratings run from -5 to 5.
            let rating = ctx.rng.range(0, 11) as i64 - 5;
            b.update(&user(to, "rating").0, Update::Increment(rating));
        }
        RubisTxn::CloseAuction => {
            // Strong against storeBid on the item: the winner is the highest bidder.
            b.read(&[item(i, "max_bid"), item(i, "bids")]);
            b.update(&item(i, "closed").0, Update::Assign(ctx.values.next()));
        }
        _ => unreachable!("{txn:?} only reads"),
    }
}

/// Lists item `i` (again, if it was listed: the info register is overwritten) in its
/// region's and category's search indexes.
fn register_item(b: &mut Builder, ctx: &mut Ctx) {
    let i = ctx.item;
    let (region, category) = (i % REGIONS, i % CATEGORIES);
    b.update(&item(i, "info").0, Update::Assign(ctx.values.next()));
    let quantity = ctx.rng.range(1, 6) as i64;
    b.update(&item(i, "quantity").0, Update::Increment(quantity));
    b.add(&format!("regions/{region}/items"), &format!("i{i}"));
    b.add(&format!("categories/{category}/items"), &format!("i{i}"));
    b.add("regions/index", &format!("r{region}"));
    b.add("categories/index", &format!("c{category}"));
}

#[cfg(test)]
mod tests {
    use super::super::tests::plans;
    use super::*;
    use crate::config::{SimConfig, WorkloadFamily};

    fn rubis_plans(n: usize) -> Vec<TxnPlan> {
        let c = SimConfig {
            workload: WorkloadFamily::Rubis,
            ..SimConfig::default()
        };
        plans(&c, n)
    }

    #[test]
    fn the_mix_covers_100_percent_with_15_updates_and_10_strong() {
        let total: u32 = BIDDING_MIX.iter().map(|(_, p)| p).sum();
        let share = |f: fn(RubisTxn) -> bool| -> u32 {
            BIDDING_MIX
                .iter()
                .filter(|(t, _)| f(*t))
                .map(|(_, p)| p)
                .sum()
        };
        assert_eq!(total, 100);
        assert_eq!(share(|t| !t.is_read_only()), 15);
        assert_eq!(share(RubisTxn::is_strong), 10);
        assert_eq!(
            BIDDING_MIX.iter().filter(|(t, _)| t.is_read_only()).count(),
            11
        );
    }

    #[test]
    fn strong_txns_are_the_four_strong_types_and_read_only_ones_never_update() {
        let ps = rubis_plans(5_000);
        let strong_names = ["registerUser", "storeBuyNow", "storeBid", "closeAuction"];
        let by_name = |n: &str| BIDDING_MIX.iter().find(|(t, _)| t.name() == n).unwrap().0;
        let mut strong = 0;
        for p in &ps {
            let txn = by_name(p.name);
            assert_eq!(
                p.kind == TxnKind::Strong,
                strong_names.contains(&p.name),
                "{p:?}"
            );
            assert_eq!(txn.is_read_only(), !p.updates(), "{p:?}");
            strong += usize::from(p.kind == TxnKind::Strong);
        }
        // 10% of 5000.
        assert!((400..600).contains(&strong), "strong {strong}");
        let names: std::collections::BTreeSet<_> = ps.iter().map(|p| p.name).collect();
        assert_eq!(names.len(), 17, "every type drawn: {names:?}");
    }

    #[test]
    fn a_bid_updates_its_item_and_the_final_reads_cover_every_planned_key() {
        let c = SimConfig {
            workload: WorkloadFamily::Rubis,
            ..SimConfig::default()
        };
        let mut w = super::super::Workload::new(&c);
        let mut rng = SimRng::new(1, 2);
        let ps: Vec<TxnPlan> = (0..500).map(|_| w.plan(0, &mut rng)).collect();
        let bid = ps.iter().find(|p| p.name == "storeBid").expect("a bid");
        let updated: Vec<String> = bid
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Update(k, _) => Some(format!("{k:?}")),
                _ => None,
            })
            .collect();
        for field in ["/bids", "/nb_bids", "/max_bid"] {
            assert!(updated.iter().any(|k| k.contains(field)), "{updated:?}");
        }
        let finals: BTreeMap<Key, ObjType> = w.all_keys().into_iter().collect();
        for step in ps.iter().flat_map(|p| &p.steps) {
            match step {
                Step::Read(k, t) => assert_eq!(finals.get(k), Some(t)),
                Step::ReadMany(ks) => ks.iter().for_each(|(k, t)| assert_eq!(finals[k], *t)),
                Step::Update(k, u) => assert_eq!(finals[k], u.obj_type()),
            }
        }
    }
}
