// A real Apache Curator peer for the interop tests (tests/testsuite/curator_interop.rs and others).
//
// Usage: java -cp <curator classpath>:<dir of this class> CuratorPeer <connect string>
//
// Reads one command per line from stdin and answers exactly one line per command on stdout
// (flushed). Prints "READY" once connected. Failures answer "ERROR <message>"; the peer never exits
// on a failed command. Commands:
//
//   acquire PATH TIMEOUT_MS     -> ACQUIRED <node path> | NOT_ACQUIRED   (handle named PATH)
//   release NAME                -> RELEASED                             (handle NAME, e.g. a PATH)
//   participants PATH           -> PARTICIPANTS a,b,c                   (getParticipantNodes order)
//   spawn NAME PATH             -> SPAWNED   (handle NAME on PATH starts an untimed acquire)
//   await NAME TIMEOUT_MS       -> ACQUIRED <node path> | PENDING | ERROR ...
//   critical PATH N COUNTER     -> DONE overlaps=<k>
//   data NAME                   -> DATA <hex of the held node's data>
//   make NAME PATH KIND REVOCABLE -> MADE   (KIND mutex|read|write|semmutex: a handle on its own
//                                  lock instance; REVOCABLE 1 = makeRevocable, the listener
//                                  releases; not for semmutex)
//   lock NAME TIMEOUT_MS        -> ACQUIRED <node path> | NOT_ACQUIRED
//   spawnlock NAME              -> SPAWNED   (untimed acquire of a made handle; see await)
//   revoked NAME                -> REVOKED true|false   (the revocation listener ran and released)
//   revoke NODE_PATH            -> REVOKE_SENT   (Revoker.attemptRevoke)
//   sem NAME PATH L             -> MADE   (an InterProcessSemaphoreV2 of L leases named NAME)
//   semacquire NAME TIMEOUT_MS  -> ACQUIRED <lease node path> | NOT_ACQUIRED   (keeps the lease)
//   semrelease NAME             -> RELEASED   (closes the oldest lease NAME keeps)
//   semcritical NAME THREADS N MARKERS HOLD_MS -> SPAWNED   (THREADS threads each take a lease of
//                                  NAME N times and record occupancy under MARKERS, see
//                                  semCritical; the result comes from semawait)
//   semawait NAME TIMEOUT_MS    -> DONE max=<most markers seen> mixed=<times a Rust marker was
//                                  seen beside ours> | PENDING | ERROR ...
//   rwloop NAME PATH ROUNDS DATA HOLD_MS SEED -> SPAWNED   (one thread takes the read or the write
//                                  lock of PATH ROUNDS times, see rwLoop; the result comes from
//                                  loopawait)
//   semloop NAME PATH LEASES ROUNDS MARKERS HOLD_MS SEED -> SPAWNED   (one thread takes a lease of
//                                  an InterProcessSemaphoreV2 of LEASES leases ROUNDS times, see
//                                  semLoop; the result comes from loopawait)
//   loopawait NAME TIMEOUT_MS   -> DONE holds=<n> timeouts=<n> violations=<n> max=<n> log=<hold>;...
//                                  | PENDING | ERROR ...   (a hold is KIND:TOKEN:START_US:END_US,
//                                  KIND R|W|L, wall-clock epoch microseconds; violations are
//                                  listed after the log as " violation: ...")
//   cwrite, cset, cdelete, cache, cachedump: the caches block below
//   zwrite, zset, zread, zraw, zacl, znsw: the data-API block below (compression, ACL, namespace)
//   --- barriers (DistributedBarrier, DistributedDoubleBarrier; see the barrier block below) ---
//   dbenter NAME PATH QTY TIMEOUT_MS -> SPAWNED   (a new DistributedDoubleBarrier(PATH, QTY) named
//                                  NAME enters in the background; result ENTERED true|false)
//   dbleave NAME TIMEOUT_MS     -> SPAWNED   (NAME leaves in the background; result LEFT true|false)
//   dbawait NAME TIMEOUT_MS     -> ENTERED ... | LEFT ... | PENDING | ERROR ...
//   barrierset PATH             -> SET       (DistributedBarrier.setBarrier)
//   barrierremove PATH          -> REMOVED   (DistributedBarrier.removeBarrier)
//   barrierwait NAME PATH TIMEOUT_MS -> SPAWNED   (waitOnBarrier in the background, result from
//                                  dbawait NAME: PASSED true|false)
//   quit                        -> BYE, then exit
//
// SimpleDistributedQueue (tests/testsuite/queue/simple.rs; simpleQueueCommand below), data as UTF-8:
//   sqoffer PATH DATA           -> OFFERED
//   sqpoll PATH TIMEOUT_MS      -> ITEM <data> | NONE   (poll(timeout))
//   sqpeek PATH                 -> ITEM <data> | NONE   (peek())
//
// recipes/nodes (tests/testsuite/nodes/curator_interop.rs; nodesCommand below):
//   pnode NAME PATH MODE PROTECTED DATA -> PNODE <actual path>   (a started PersistentNode of MODE
//                                  (a CreateMode name), PROTECTED 1|0, DATA as UTF-8; waits up to
//                                  10 s for the initial create)
//   pnodeclose NAME             -> CLOSED
//   member NAME PATH ID DATA    -> MEMBER   (a started GroupMember)
//   members NAME                -> MEMBERS id=data,...   (getCurrentMembers, sorted by id)
//   memberclose NAME            -> CLOSED
//
// curator-x-discovery (tests/testsuite/discovery/interop.rs; discoveryCommand below), one
// ServiceDiscovery<Object> per BASE with JsonInstanceSerializer<Object>(Object.class), started on
// first use; an instance is listed as id|address|port|sslPort|enabled|uri|payload class|payload:
//   dreg BASE NAME ID PORT REGION WEIGHT -> REGISTERED   (a Dynamic instance at 127.0.0.1, uri spec
//                                  {scheme}://{address}:{port}, payload a PeerPayload)
//   dupdate BASE NAME ID PORT REGION WEIGHT -> UPDATED
//   dunreg BASE NAME ID         -> UNREGISTERED
//   dnames BASE                 -> NAMES a,b
//   dlist BASE NAME             -> INSTANCES inst;inst;...   (queryForInstances, sorted by id)
//   dcache CNAME BASE NAME      -> STARTED   (a started ServiceCache)
//   dcachedump CNAME            -> INSTANCES ...   (getInstances, sorted by id)
//   dprovider PNAME BASE NAME   -> STARTED   (a started round-robin ServiceProvider)
//   dpick PNAME N               -> PICKS id,id,...   (N getInstance calls; "-" for null)
//   dclose BASE                 -> CLOSED   (ServiceDiscovery.close: unregisters its instances)
//
// DistributedQueue<byte[]> (tests/testsuite/queue/interop.rs; queueCommand below), items as UTF-8:
//   qput PATH ITEM              -> PUT   (a producer-only queue, put in the foreground)
//   qputmulti PATH A,B,...      -> PUT   (putMulti: the items in one node)
//   qconsume NAME PATH LOCK HOLD_MS -> STARTED   (a started consumer; LOCK a lock path or "-";
//                                  consumeMessage records the item and sleeps HOLD_MS)
//   qgot NAME                   -> GOT item:start_us:end_us;...   (consumed so far, in order;
//                                  wall-clock epoch microseconds)
//   qclose NAME                 -> CLOSED
//
// DistributedPriorityQueue / DistributedDelayQueue / DistributedIdQueue<byte[]>
// (tests/testsuite/queue/{priority,delay,id}.rs; queueKindCommand below), items as UTF-8; a
// consumer's items are read with `qgot NAME` (as qconsume's):
//   pqput PATH PRIORITY ITEM     -> PUT   (a producer-only priority queue, put in the foreground)
//   pqconsume NAME PATH LOCK MIN -> STARTED   (buildPriorityQueue(MIN); LOCK a lock path or "-")
//   dqput PATH EPOCH_MS ITEM     -> PUT   (a producer-only delay queue: put(item, EPOCH_MS))
//   dqconsume NAME PATH LOCK     -> STARTED
//   iqput PATH ID ITEM           -> PUT   (a producer-only id queue: put(item, ID))
//   iqremove PATH ID             -> REMOVED n   (remove(ID) on the producer-only id queue)
//   iqconsume NAME PATH LOCK     -> STARTED
//   kqclose NAME                 -> CLOSED   (closes a pq/dq/iq consumer)
//
// QueueSharder over DistributedQueue<byte[]> (tests/testsuite/queue/sharder.rs; sharderCommand
// below), items as UTF-8; with CONSUME 1 every shard's queue has a consumer whose items are read
// with `qgot NAME` (as qconsume's):
//   sstart NAME QPATH LPATH THRESHOLD CHECK_MS MAX CONSUME -> STARTED   (a started QueueSharder,
//                                  its shards putInBackground(false))
//   sput NAME ITEM               -> PUT   (getQueue().put(ITEM))
//   sshards NAME                 -> SHARDS path,path,...   (getQueuePaths, sorted)
//   sleader NAME                 -> LEADER true|false   (the sharder's latch, by reflection)
//   sclose NAME                  -> CLOSED
//
// Every handle is one InterProcessMutex instance with its own single thread, so acquire and release
// of a handle always run on the same thread (Curator's mutex is owned by a thread).

import java.io.BufferedReader;
import java.lang.reflect.Method;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.Random;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.recipes.atomic.AtomicValue;
import org.apache.curator.framework.recipes.atomic.DistributedAtomicLong;
import org.apache.curator.framework.recipes.locks.InterProcessLock;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorPeer {
    /** Exposes Curator's protected getLockPath(). */
    static final class PeerMutex extends InterProcessMutex {
        PeerMutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String lockPath() {
            return getLockPath();
        }
    }

    /**
     * The held node of a lock: Curator's protected getLockPath() of any InterProcessMutex
     * (read/write halves included); for a semaphore mutex, its private lease's node under
     * PATH/leases.
     */
    static String lockPathOf(InterProcessLock lock, String path) throws Exception {
        if (lock instanceof PeerMutex) {
            return ((PeerMutex) lock).lockPath();
        }
        if (lock instanceof InterProcessSemaphoreMutex) {
            java.lang.reflect.Field field = InterProcessSemaphoreMutex.class.getDeclaredField("lease");
            field.setAccessible(true);
            Lease lease = (Lease) field.get(lock);
            return lease == null ? null : path + "/leases/" + lease.getNodeName();
        }
        Method getter = InterProcessMutex.class.getDeclaredMethod("getLockPath");
        getter.setAccessible(true);
        return (String) getter.invoke(lock);
    }

    static final class Handle {
        final String path;
        final InterProcessLock mutex;
        final ExecutorService thread;
        Future<String> pending;
        volatile boolean revoked;

        Handle(CuratorFramework client, String name, String path) {
            this(client, name, path, "mutex", false);
        }

        Handle(CuratorFramework client, String name, String path, String kind, boolean revocable) {
            this.path = path;
            switch (kind) {
                case "mutex": this.mutex = new PeerMutex(client, path); break;
                case "read": this.mutex = new InterProcessReadWriteLock(client, path).readLock(); break;
                case "write": this.mutex = new InterProcessReadWriteLock(client, path).writeLock(); break;
                case "semmutex": this.mutex = new InterProcessSemaphoreMutex(client, path); break;
                default: throw new IllegalArgumentException("unknown lock kind " + kind);
            }
            this.thread = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "peer-" + name);
                t.setDaemon(true);
                return t;
            });
            if (revocable) {
                // The listener runs on ZooKeeper's event thread; release on the owning thread.
                ((InterProcessMutex) mutex).makeRevocable(lock -> thread.submit(() -> {
                    mutex.release();
                    revoked = true;
                    return null;
                }));
            }
        }

        <T> T run(Callable<T> task) throws Exception {
            try {
                return thread.submit(task).get();
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof Exception) {
                    throw (Exception) cause;
                }
                throw e;
            }
        }
    }

    /** One InterProcessSemaphoreV2 instance and the leases taken through it. */
    static final class SemHandle {
        final String path;
        final InterProcessSemaphoreV2 semaphore;
        final Deque<Lease> leases = new ArrayDeque<>();
        Future<String> pending;

        SemHandle(CuratorFramework client, String path, int maxLeases) {
            this.path = path;
            this.semaphore = new InterProcessSemaphoreV2(client, path, maxLeases);
        }
    }

    private final CuratorFramework client;
    private final Map<String, Handle> handles = new HashMap<>();
    private final Map<String, SemHandle> semaphores = new HashMap<>();
    private final Map<String, Future<String>> loops = new HashMap<>();
    private final ExecutorService background = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "peer-background");
        t.setDaemon(true);
        return t;
    });

    CuratorPeer(CuratorFramework client) {
        this.client = client;
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        if (args.length != 1) {
            out.println("ERROR usage: CuratorPeer <connect string>");
            System.exit(2);
        }
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], new ExponentialBackoffRetry(100, 3));
        client.start();
        if (!client.blockUntilConnected(100, TimeUnit.SECONDS)) {
            out.println("ERROR cannot connect to " + args[0]);
            System.exit(1);
        }
        CuratorPeer peer = new CuratorPeer(client);
        out.println("READY");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.isEmpty()) {
                continue;
            }
            if (line.equals("quit")) {
                out.println("BYE");
                break;
            }
            String answer;
            try {
                answer = peer.execute(line.split("\\s+"));
            } catch (Throwable e) {
                answer = "ERROR " + e;
            }
            out.println(answer.replace('\n', ' ').replace('\r', ' '));
        }
        // stdin closed or quit: the session closes and its ephemeral nodes go with it.
        client.close();
        System.exit(0);
    }

    private Handle handle(String name, String path) {
        Handle h = handles.get(name);
        if (h == null) {
            h = new Handle(client, name, path);
            handles.put(name, h);
        } else if (!h.path.equals(path)) {
            throw new IllegalArgumentException("handle " + name + " is on " + h.path + ", not " + path);
        }
        return h;
    }

    private Handle existing(String name) {
        Handle h = handles.get(name);
        if (h == null) {
            throw new IllegalArgumentException("no handle " + name);
        }
        return h;
    }

    private static void arity(String[] cmd, int n) {
        if (cmd.length != n) {
            throw new IllegalArgumentException(cmd[0] + " takes " + (n - 1) + " arguments");
        }
    }

    String execute(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "increment": {
                // increment PATH N: N successful DistributedAtomicLong increments (a call that
                // gives up is made again); answers "INCREMENTED <post values, comma-separated>".
                arity(cmd, 3);
                DistributedAtomicLong counter = new DistributedAtomicLong(client, cmd[1], new org.apache.curator.retry.RetryNTimes(1000, 1));
                StringBuilder posts = new StringBuilder();
                for (int i = 0; i < Integer.parseInt(cmd[2]); i++) {
                    AtomicValue<Long> v;
                    do { v = counter.increment(); } while (!v.succeeded());
                    if (posts.length() > 0) posts.append(',');
                    posts.append(v.postValue());
                }
                return "INCREMENTED " + posts;
            }
            case "counter": {
                // counter PATH: Curator's DistributedAtomicLong.get() of PATH.
                arity(cmd, 2);
                return "COUNTER " + new DistributedAtomicLong(client, cmd[1], new org.apache.curator.retry.RetryNTimes(3, 10)).get().postValue();
            }
            case "acquire": {
                arity(cmd, 3);
                Handle h = handle(cmd[1], cmd[1]);
                long ms = Long.parseLong(cmd[2]);
                return h.run(() -> h.mutex.acquire(ms, TimeUnit.MILLISECONDS)
                        ? "ACQUIRED " + lockPathOf(h.mutex, h.path)
                        : "NOT_ACQUIRED");
            }
            case "release": {
                arity(cmd, 2);
                Handle h = existing(cmd[1]);
                return h.run(() -> {
                    h.mutex.release();
                    return "RELEASED";
                });
            }
            case "participants": {
                arity(cmd, 2);
                List<String> nodes = new ArrayList<>(new InterProcessMutex(client, cmd[1]).getParticipantNodes());
                return nodes.isEmpty() ? "PARTICIPANTS" : "PARTICIPANTS " + String.join(",", nodes);
            }
            case "spawn": {
                arity(cmd, 3);
                Handle h = handle(cmd[1], cmd[2]);
                if (h.pending != null && !h.pending.isDone()) {
                    throw new IllegalStateException("handle " + cmd[1] + " is already acquiring");
                }
                h.pending = h.thread.submit(() -> {
                    h.mutex.acquire();
                    return "ACQUIRED " + lockPathOf(h.mutex, h.path);
                });
                return "SPAWNED";
            }
            case "await": {
                arity(cmd, 3);
                Handle h = existing(cmd[1]);
                if (h.pending == null) {
                    throw new IllegalStateException("handle " + cmd[1] + " has no pending acquire");
                }
                String result = awaitPending(h.pending, cmd[2]);
                if (!result.equals("PENDING")) {
                    h.pending = null;
                }
                return result;
            }
            case "critical": {
                arity(cmd, 4);
                Handle h = handle(cmd[1], cmd[1]);
                int n = Integer.parseInt(cmd[2]);
                String counter = cmd[3];
                return h.run(() -> "DONE overlaps=" + critical(h.mutex, n, counter));
            }
            case "data": {
                arity(cmd, 2);
                Handle h = existing(cmd[1]);
                String node = h.run(() -> lockPathOf(h.mutex, h.path));
                if (node == null) {
                    throw new IllegalStateException("handle " + cmd[1] + " holds nothing");
                }
                StringBuilder hex = new StringBuilder();
                for (byte b : client.getData().forPath(node)) {
                    hex.append(String.format("%02x", b));
                }
                return "DATA " + hex;
            }
            case "make": {
                arity(cmd, 5);
                if (handles.containsKey(cmd[1])) {
                    throw new IllegalArgumentException("handle " + cmd[1] + " exists");
                }
                handles.put(cmd[1], new Handle(client, cmd[1], cmd[2], cmd[3], cmd[4].equals("1")));
                return "MADE";
            }
            case "lock": {
                arity(cmd, 3);
                Handle h = existing(cmd[1]);
                long ms = Long.parseLong(cmd[2]);
                return h.run(() -> h.mutex.acquire(ms, TimeUnit.MILLISECONDS)
                        ? "ACQUIRED " + lockPathOf(h.mutex, h.path)
                        : "NOT_ACQUIRED");
            }
            case "spawnlock": {
                arity(cmd, 2);
                Handle h = existing(cmd[1]);
                if (h.pending != null && !h.pending.isDone()) {
                    throw new IllegalStateException("handle " + cmd[1] + " is already acquiring");
                }
                h.pending = h.thread.submit(() -> {
                    h.mutex.acquire();
                    return "ACQUIRED " + lockPathOf(h.mutex, h.path);
                });
                return "SPAWNED";
            }
            case "revoked": {
                arity(cmd, 2);
                return "REVOKED " + existing(cmd[1]).revoked;
            }
            case "revoke": {
                arity(cmd, 2);
                Revoker.attemptRevoke(client, cmd[1]);
                return "REVOKE_SENT";
            }
            case "sem": {
                arity(cmd, 4);
                if (semaphores.containsKey(cmd[1])) {
                    throw new IllegalArgumentException("semaphore " + cmd[1] + " exists");
                }
                semaphores.put(cmd[1], new SemHandle(client, cmd[2], Integer.parseInt(cmd[3])));
                return "MADE";
            }
            case "semacquire": {
                arity(cmd, 3);
                SemHandle h = existingSem(cmd[1]);
                Lease lease = h.semaphore.acquire(Long.parseLong(cmd[2]), TimeUnit.MILLISECONDS);
                if (lease == null) {
                    return "NOT_ACQUIRED";
                }
                synchronized (h.leases) {
                    h.leases.addLast(lease);
                }
                return "ACQUIRED " + h.path + "/leases/" + lease.getNodeName();
            }
            case "semrelease": {
                arity(cmd, 2);
                SemHandle h = existingSem(cmd[1]);
                Lease lease;
                synchronized (h.leases) {
                    lease = h.leases.pollFirst();
                }
                if (lease == null) {
                    throw new IllegalStateException("semaphore " + cmd[1] + " keeps no lease");
                }
                lease.close();
                return "RELEASED";
            }
            case "semcritical": {
                arity(cmd, 6);
                SemHandle h = existingSem(cmd[1]);
                if (h.pending != null && !h.pending.isDone()) {
                    throw new IllegalStateException("semaphore " + cmd[1] + " is already busy");
                }
                int threads = Integer.parseInt(cmd[2]);
                int n = Integer.parseInt(cmd[3]);
                String markers = cmd[4];
                long holdMs = Long.parseLong(cmd[5]);
                h.pending = background.submit(() -> semCritical(h.semaphore, threads, n, markers, holdMs));
                return "SPAWNED";
            }
            case "semawait": {
                arity(cmd, 3);
                SemHandle h = existingSem(cmd[1]);
                if (h.pending == null) {
                    throw new IllegalStateException("semaphore " + cmd[1] + " has nothing running");
                }
                String result = awaitPending(h.pending, cmd[2]);
                if (!result.equals("PENDING")) {
                    h.pending = null;
                }
                return result;
            }
            case "rwloop": {
                arity(cmd, 7);
                String path = cmd[2];
                int rounds = Integer.parseInt(cmd[3]);
                String data = cmd[4];
                long holdMs = Long.parseLong(cmd[5]);
                long seed = Long.parseLong(cmd[6]);
                startLoop(cmd[1], () -> rwLoop(path, rounds, data, holdMs, seed));
                return "SPAWNED";
            }
            case "semloop": {
                arity(cmd, 8);
                String path = cmd[2];
                int leases = Integer.parseInt(cmd[3]);
                int rounds = Integer.parseInt(cmd[4]);
                String markers = cmd[5];
                long holdMs = Long.parseLong(cmd[6]);
                long seed = Long.parseLong(cmd[7]);
                startLoop(cmd[1], () -> semLoop(path, leases, rounds, markers, holdMs, seed));
                return "SPAWNED";
            }
            case "loopawait": {
                arity(cmd, 3);
                Future<String> pending = loops.get(cmd[1]);
                if (pending == null) {
                    throw new IllegalStateException("no loop " + cmd[1]);
                }
                String result = awaitPending(pending, cmd[2]);
                if (!result.equals("PENDING")) {
                    loops.remove(cmd[1]);
                }
                return result;
            }
            case "dbenter":
            case "dbleave":
            case "dbawait":
            case "barrierset":
            case "barrierremove":
            case "barrierwait":
                return barrierCommand(cmd);
            default: {
                String cached = cacheCommand(cmd);
                if (cached != null) {
                    return cached;
                }
                String nodes = nodesCommand(cmd);
                if (nodes != null) {
                    return nodes;
                }
                String discovered = discoveryCommand(cmd);
                if (discovered != null) {
                    return discovered;
                }
                String data = dataApiCommand(cmd);
                if (data != null) {
                    return data;
                }
                String queued = queueCommand(cmd);
                if (queued != null) {
                    return queued;
                }
                String simpleQueued = simpleQueueCommand(cmd);
                if (simpleQueued != null) {
                    return simpleQueued;
                }
                String kindQueued = queueKindCommand(cmd);
                if (kindQueued != null) {
                    return kindQueued;
                }
                String sharded = sharderCommand(cmd);
                if (sharded != null) {
                    return sharded;
                }
                throw new IllegalArgumentException("unknown command " + cmd[0]);
            }
        }
    }

    // ---- DistributedQueue ----------------------------------------------------------------------

    static final org.apache.curator.framework.recipes.queue.QueueSerializer<byte[]> QUEUE_BYTES =
            new org.apache.curator.framework.recipes.queue.QueueSerializer<byte[]>() {
                public byte[] serialize(byte[] item) { return item; }
                public byte[] deserialize(byte[] bytes) { return bytes; }
            };

    private final Map<String, org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>> queues = new HashMap<>();
    private final Map<String, List<String>> consumed = new HashMap<>();

    private org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]> producer(String path) throws Exception {
        String key = "producer " + path;
        org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]> q = queues.get(key);
        if (q == null) {
            q = org.apache.curator.framework.recipes.queue.QueueBuilder.builder(client, null, QUEUE_BYTES, path)
                    .putInBackground(false)
                    .buildQueue();
            q.start();
            queues.put(key, q);
        }
        return q;
    }

    /** The answer to a DistributedQueue command, or null when cmd is not one. */
    private String queueCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "qput": {
                arity(cmd, 3);
                producer(cmd[1]).put(cmd[2].getBytes(StandardCharsets.UTF_8));
                return "PUT";
            }
            case "qputmulti": {
                arity(cmd, 3);
                final java.util.Iterator<String> items = java.util.Arrays.asList(cmd[2].split(",")).iterator();
                producer(cmd[1]).putMulti(new org.apache.curator.framework.recipes.queue.MultiItem<byte[]>() {
                    public byte[] nextItem() {
                        return items.hasNext() ? items.next().getBytes(StandardCharsets.UTF_8) : null;
                    }
                });
                return "PUT";
            }
            case "qconsume": {
                arity(cmd, 5);
                final List<String> log = java.util.Collections.synchronizedList(new ArrayList<String>());
                final long holdMs = Long.parseLong(cmd[4]);
                org.apache.curator.framework.recipes.queue.QueueConsumer<byte[]> consumer =
                        new org.apache.curator.framework.recipes.queue.QueueConsumer<byte[]>() {
                            public void consumeMessage(byte[] message) throws Exception {
                                long start = epochMicros();
                                if (holdMs > 0) {
                                    Thread.sleep(holdMs);
                                }
                                log.add(new String(message, StandardCharsets.UTF_8) + ":" + start + ":" + epochMicros());
                            }

                            public void stateChanged(CuratorFramework c, org.apache.curator.framework.state.ConnectionState s) {}
                        };
                org.apache.curator.framework.recipes.queue.QueueBuilder<byte[]> builder =
                        org.apache.curator.framework.recipes.queue.QueueBuilder.builder(client, consumer, QUEUE_BYTES, cmd[2]);
                if (!cmd[3].equals("-")) {
                    builder = builder.lockPath(cmd[3]);
                }
                org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]> q = builder.buildQueue();
                q.start();
                queues.put(cmd[1], q);
                consumed.put(cmd[1], log);
                return "STARTED";
            }
            case "qgot": {
                arity(cmd, 2);
                List<String> log = consumed.get(cmd[1]);
                if (log == null) {
                    throw new IllegalArgumentException("no queue consumer " + cmd[1]);
                }
                synchronized (log) {
                    return "GOT " + String.join(";", log);
                }
            }
            case "qclose": {
                arity(cmd, 2);
                org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]> q = queues.remove(cmd[1]);
                if (q != null) {
                    q.close();
                }
                return "CLOSED";
            }
            default:
                return null;
        }
    }

    // ---- the data API (tests/testsuite/data_api/curator_interop.rs) ----------------------------
    //   zwrite PATH HEX         -> ZWROTE   (create().compressed().creatingParentsIfNeeded(): the
    //                              default GzipCompressionProvider; HEX "-" is no data)
    //   zset PATH HEX           -> ZSET     (setData().compressed())
    //   zread PATH              -> ZDATA <hex> | ZNOTGZIP <message>   (getData().decompressed();
    //                              ZNOTGZIP: the provider's ZipException or EOFException)
    //   zraw PATH               -> ZRAW <hex>    (getData(), the bytes as stored)
    //   zacl PATH               -> ZACL scheme:id:perms,...   (getACL(), perms as ZooDefs.Perms bits)
    //   znsw NS PATH HEX        -> ZWROTE   (usingNamespace(NS).create(), no parents asked for)

    private static String hex(byte[] bytes) {
        StringBuilder hex = new StringBuilder();
        for (byte b : bytes == null ? new byte[0] : bytes) {
            hex.append(String.format("%02x", b));
        }
        return hex.toString();
    }

    private static byte[] unhex(String hex) {
        if (hex.equals("-")) {
            return new byte[0];
        }
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return bytes;
    }

    /** The answer to a data-API command, or null when cmd is not one. */
    private String dataApiCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "zwrite": {
                arity(cmd, 3);
                client.create().compressed().creatingParentsIfNeeded().forPath(cmd[1], unhex(cmd[2]));
                return "ZWROTE";
            }
            case "zset": {
                arity(cmd, 3);
                client.setData().compressed().forPath(cmd[1], unhex(cmd[2]));
                return "ZSET";
            }
            case "zread": {
                arity(cmd, 2);
                try {
                    return "ZDATA " + hex(client.getData().decompressed().forPath(cmd[1]));
                } catch (java.util.zip.ZipException | java.io.EOFException e) {
                    return "ZNOTGZIP " + e.getMessage();
                }
            }
            case "zraw": {
                arity(cmd, 2);
                return "ZRAW " + hex(client.getData().forPath(cmd[1]));
            }
            case "zacl": {
                arity(cmd, 2);
                List<String> entries = new ArrayList<>();
                for (org.apache.zookeeper.data.ACL acl : client.getACL().forPath(cmd[1])) {
                    entries.add(acl.getId().getScheme() + ":" + acl.getId().getId() + ":" + acl.getPerms());
                }
                return "ZACL " + String.join(",", entries);
            }
            case "znsw": {
                arity(cmd, 4);
                client.usingNamespace(cmd[1]).create().forPath(cmd[2], unhex(cmd[3]));
                return "ZWROTE";
            }
            default:
                return null;
        }
    }

    // ---- QueueSharder --------------------------------------------------------------------------

    private final Map<String, org.apache.curator.framework.recipes.queue.QueueSharder<byte[],
            org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>>> sharders = new HashMap<>();

    private org.apache.curator.framework.recipes.queue.QueueSharder<byte[],
            org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>> sharder(String name) {
        org.apache.curator.framework.recipes.queue.QueueSharder<byte[],
                org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>> s = sharders.get(name);
        if (s == null) {
            throw new IllegalArgumentException("no sharder " + name);
        }
        return s;
    }

    /** The answer to a QueueSharder command, or null when cmd is not one. */
    private String sharderCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "sstart": {
                arity(cmd, 8);
                final org.apache.curator.framework.recipes.queue.QueueConsumer<byte[]> consumer =
                        cmd[7].equals("1") ? recordingConsumer(cmd[1]) : null;
                org.apache.curator.framework.recipes.queue.QueueAllocator<byte[],
                        org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>> allocator =
                        (c, path) -> org.apache.curator.framework.recipes.queue.QueueBuilder
                                .builder(c, consumer, QUEUE_BYTES, path)
                                .putInBackground(false)
                                .buildQueue();
                org.apache.curator.framework.recipes.queue.QueueSharderPolicies policies =
                        org.apache.curator.framework.recipes.queue.QueueSharderPolicies.builder()
                                .newQueueThreshold(Integer.parseInt(cmd[4]))
                                .thresholdCheckMs(Integer.parseInt(cmd[5]))
                                .maxQueues(Integer.parseInt(cmd[6]))
                                .build();
                org.apache.curator.framework.recipes.queue.QueueSharder<byte[],
                        org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>> s =
                        new org.apache.curator.framework.recipes.queue.QueueSharder<>(
                                client, allocator, cmd[2], cmd[3], policies);
                s.start();
                sharders.put(cmd[1], s);
                return "STARTED";
            }
            case "sput": {
                arity(cmd, 3);
                sharder(cmd[1]).getQueue().put(cmd[2].getBytes(StandardCharsets.UTF_8));
                return "PUT";
            }
            case "sshards": {
                arity(cmd, 2);
                List<String> paths = new ArrayList<>(sharder(cmd[1]).getQueuePaths());
                java.util.Collections.sort(paths);
                return "SHARDS " + String.join(",", paths);
            }
            case "sleader": {
                arity(cmd, 2);
                java.lang.reflect.Field field =
                        org.apache.curator.framework.recipes.queue.QueueSharder.class.getDeclaredField("leaderLatch");
                field.setAccessible(true);
                org.apache.curator.framework.recipes.leader.LeaderLatch latch =
                        (org.apache.curator.framework.recipes.leader.LeaderLatch) field.get(sharder(cmd[1]));
                return "LEADER " + latch.hasLeadership();
            }
            case "sclose": {
                arity(cmd, 2);
                org.apache.curator.framework.recipes.queue.QueueSharder<byte[],
                        org.apache.curator.framework.recipes.queue.DistributedQueue<byte[]>> s = sharders.remove(cmd[1]);
                if (s != null) {
                    s.close();
                }
                return "CLOSED";
            }
            default:
                return null;
        }
    }

    // ---- DistributedPriorityQueue / DistributedDelayQueue / DistributedIdQueue --------------------

    private final Map<String, java.io.Closeable> kindQueues = new HashMap<>();

    /** A consumer recording each item as item:start_us:end_us in a new log named NAME. */
    private org.apache.curator.framework.recipes.queue.QueueConsumer<byte[]> recordingConsumer(String name) {
        final List<String> log = java.util.Collections.synchronizedList(new ArrayList<String>());
        consumed.put(name, log);
        return new org.apache.curator.framework.recipes.queue.QueueConsumer<byte[]>() {
            public void consumeMessage(byte[] message) {
                long start = epochMicros();
                log.add(new String(message, StandardCharsets.UTF_8) + ":" + start + ":" + epochMicros());
            }

            public void stateChanged(CuratorFramework c, org.apache.curator.framework.state.ConnectionState s) {}
        };
    }

    private org.apache.curator.framework.recipes.queue.QueueBuilder<byte[]> kindBuilder(
            org.apache.curator.framework.recipes.queue.QueueConsumer<byte[]> consumer, String path, String lock) {
        org.apache.curator.framework.recipes.queue.QueueBuilder<byte[]> builder =
                org.apache.curator.framework.recipes.queue.QueueBuilder.builder(client, consumer, QUEUE_BYTES, path)
                        .putInBackground(false);
        return lock.equals("-") ? builder : builder.lockPath(lock);
    }

    /** A started producer-only queue of kind KIND at PATH, made by MAKE once and kept. */
    @SuppressWarnings("unchecked")
    private <Q extends org.apache.curator.framework.recipes.queue.QueueBase<byte[]>> Q kindProducer(
            String kind, String path, java.util.function.Function<org.apache.curator.framework.recipes.queue.QueueBuilder<byte[]>, Q> make)
            throws Exception {
        String key = kind + " producer " + path;
        Q q = (Q) kindQueues.get(key);
        if (q == null) {
            q = make.apply(kindBuilder(null, path, "-"));
            q.start();
            kindQueues.put(key, q);
        }
        return q;
    }

    /** The answer to a priority, delay or id queue command, or null when cmd is not one. */
    private String queueKindCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "pqput": {
                arity(cmd, 4);
                org.apache.curator.framework.recipes.queue.DistributedPriorityQueue<byte[]> q =
                        kindProducer("pq", cmd[1], b -> b.buildPriorityQueue(0));
                q.put(cmd[3].getBytes(StandardCharsets.UTF_8), Integer.parseInt(cmd[2]));
                return "PUT";
            }
            case "pqconsume": {
                arity(cmd, 5);
                org.apache.curator.framework.recipes.queue.DistributedPriorityQueue<byte[]> q =
                        kindBuilder(recordingConsumer(cmd[1]), cmd[2], cmd[3]).buildPriorityQueue(Integer.parseInt(cmd[4]));
                q.start();
                kindQueues.put(cmd[1], q);
                return "STARTED";
            }
            case "dqput": {
                arity(cmd, 4);
                org.apache.curator.framework.recipes.queue.DistributedDelayQueue<byte[]> q =
                        kindProducer("dq", cmd[1], b -> b.buildDelayQueue());
                q.put(cmd[3].getBytes(StandardCharsets.UTF_8), Long.parseLong(cmd[2]));
                return "PUT";
            }
            case "dqconsume": {
                arity(cmd, 4);
                org.apache.curator.framework.recipes.queue.DistributedDelayQueue<byte[]> q =
                        kindBuilder(recordingConsumer(cmd[1]), cmd[2], cmd[3]).buildDelayQueue();
                q.start();
                kindQueues.put(cmd[1], q);
                return "STARTED";
            }
            case "iqput": {
                arity(cmd, 4);
                org.apache.curator.framework.recipes.queue.DistributedIdQueue<byte[]> q =
                        kindProducer("iq", cmd[1], b -> b.buildIdQueue());
                q.put(cmd[3].getBytes(StandardCharsets.UTF_8), cmd[2]);
                return "PUT";
            }
            case "iqremove": {
                arity(cmd, 3);
                org.apache.curator.framework.recipes.queue.DistributedIdQueue<byte[]> q =
                        kindProducer("iq", cmd[1], b -> b.buildIdQueue());
                return "REMOVED " + q.remove(cmd[2]);
            }
            case "iqconsume": {
                arity(cmd, 4);
                org.apache.curator.framework.recipes.queue.DistributedIdQueue<byte[]> q =
                        kindBuilder(recordingConsumer(cmd[1]), cmd[2], cmd[3]).buildIdQueue();
                q.start();
                kindQueues.put(cmd[1], q);
                return "STARTED";
            }
            case "kqclose": {
                arity(cmd, 2);
                java.io.Closeable q = kindQueues.remove(cmd[1]);
                if (q != null) {
                    q.close();
                }
                return "CLOSED";
            }
            default:
                return null;
        }
    }

    // ---- SimpleDistributedQueue ------------------------------------------------------------------

    /** The answer to a SimpleDistributedQueue command, or null when cmd is not one. */
    private String simpleQueueCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "sqoffer": {
                arity(cmd, 3);
                new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, cmd[1])
                        .offer(cmd[2].getBytes(StandardCharsets.UTF_8));
                return "OFFERED";
            }
            case "sqpoll": {
                arity(cmd, 3);
                byte[] item = new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, cmd[1])
                        .poll(Long.parseLong(cmd[2]), TimeUnit.MILLISECONDS);
                return item == null ? "NONE" : "ITEM " + new String(item, StandardCharsets.UTF_8);
            }
            case "sqpeek": {
                arity(cmd, 2);
                byte[] item = new org.apache.curator.framework.recipes.queue.SimpleDistributedQueue(client, cmd[1]).peek();
                return item == null ? "NONE" : "ITEM " + new String(item, StandardCharsets.UTF_8);
            }
            default:
                return null;
        }
    }

    // ---- curator-x-discovery ------------------------------------------------------------------

    /** The payload the peer registers with: Jackson writes it with its class name (@class). */
    public static final class PeerPayload {
        public String region;
        public int weight;

        public PeerPayload() {}

        PeerPayload(String region, int weight) {
            this.region = region;
            this.weight = weight;
        }

        @Override
        public String toString() {
            return "{region=" + region + ", weight=" + weight + "}";
        }
    }

    private final Map<String, org.apache.curator.x.discovery.ServiceDiscovery<Object>> discoveries = new HashMap<>();
    private final Map<String, org.apache.curator.x.discovery.ServiceCache<Object>> serviceCaches = new HashMap<>();
    private final Map<String, org.apache.curator.x.discovery.ServiceProvider<Object>> providers = new HashMap<>();

    private org.apache.curator.x.discovery.ServiceDiscovery<Object> discovery(String base) throws Exception {
        org.apache.curator.x.discovery.ServiceDiscovery<Object> d = discoveries.get(base);
        if (d == null) {
            d = org.apache.curator.x.discovery.ServiceDiscoveryBuilder.builder(Object.class)
                    .client(client)
                    .basePath(base)
                    .serializer(new org.apache.curator.x.discovery.details.JsonInstanceSerializer<Object>(Object.class))
                    .build();
            d.start();
            discoveries.put(base, d);
        }
        return d;
    }

    private static org.apache.curator.x.discovery.ServiceInstance<Object> peerInstance(String[] cmd) throws Exception {
        return org.apache.curator.x.discovery.ServiceInstance.builder()
                .name(cmd[2])
                .id(cmd[3])
                .address("127.0.0.1")
                .port(Integer.parseInt(cmd[4]))
                .uriSpec(new org.apache.curator.x.discovery.UriSpec("{scheme}://{address}:{port}"))
                .payload(new PeerPayload(cmd[5], Integer.parseInt(cmd[6])))
                .build();
    }

    private static String listed(java.util.Collection<org.apache.curator.x.discovery.ServiceInstance<Object>> instances) {
        java.util.TreeMap<String, String> byId = new java.util.TreeMap<>();
        for (org.apache.curator.x.discovery.ServiceInstance<Object> i : instances) {
            Object payload = i.getPayload();
            byId.put(i.getId(), i.getId() + "|" + i.getAddress() + "|" + i.getPort() + "|" + i.getSslPort() + "|"
                    + i.isEnabled() + "|" + i.buildUriSpec() + "|"
                    + (payload == null ? "null" : payload.getClass().getName()) + "|" + payload);
        }
        return "INSTANCES " + String.join(";", byId.values()).replace(' ', '_');
    }

    /** The answer to a curator-x-discovery command, or null when cmd is not one. */
    private String discoveryCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "dreg": {
                arity(cmd, 7);
                discovery(cmd[1]).registerService(peerInstance(cmd));
                return "REGISTERED";
            }
            case "dupdate": {
                arity(cmd, 7);
                discovery(cmd[1]).updateService(peerInstance(cmd));
                return "UPDATED";
            }
            case "dunreg": {
                arity(cmd, 4);
                org.apache.curator.x.discovery.ServiceInstance<Object> i =
                        org.apache.curator.x.discovery.ServiceInstance.builder().name(cmd[2]).id(cmd[3]).build();
                discovery(cmd[1]).unregisterService(i);
                return "UNREGISTERED";
            }
            case "dnames": {
                arity(cmd, 2);
                java.util.List<String> names = new java.util.ArrayList<>(discovery(cmd[1]).queryForNames());
                java.util.Collections.sort(names);
                return "NAMES " + String.join(",", names);
            }
            case "dlist": {
                arity(cmd, 3);
                return listed(discovery(cmd[1]).queryForInstances(cmd[2]));
            }
            case "dcache": {
                arity(cmd, 4);
                org.apache.curator.x.discovery.ServiceCache<Object> cache =
                        discovery(cmd[2]).serviceCacheBuilder().name(cmd[3]).build();
                cache.start();
                serviceCaches.put(cmd[1], cache);
                return "STARTED";
            }
            case "dcachedump": {
                arity(cmd, 2);
                org.apache.curator.x.discovery.ServiceCache<Object> cache = serviceCaches.get(cmd[1]);
                if (cache == null) {
                    throw new IllegalArgumentException("no service cache " + cmd[1]);
                }
                return listed(cache.getInstances());
            }
            case "dprovider": {
                arity(cmd, 4);
                org.apache.curator.x.discovery.ServiceProvider<Object> provider =
                        discovery(cmd[2]).serviceProviderBuilder().serviceName(cmd[3]).build();
                provider.start();
                providers.put(cmd[1], provider);
                return "STARTED";
            }
            case "dpick": {
                arity(cmd, 3);
                org.apache.curator.x.discovery.ServiceProvider<Object> provider = providers.get(cmd[1]);
                if (provider == null) {
                    throw new IllegalArgumentException("no service provider " + cmd[1]);
                }
                java.util.List<String> picks = new java.util.ArrayList<>();
                for (int n = Integer.parseInt(cmd[2]); n > 0; n--) {
                    org.apache.curator.x.discovery.ServiceInstance<Object> i = provider.getInstance();
                    picks.add(i == null ? "-" : i.getId());
                }
                return "PICKS " + String.join(",", picks);
            }
            case "dclose": {
                arity(cmd, 2);
                org.apache.curator.x.discovery.ServiceDiscovery<Object> d = discoveries.remove(cmd[1]);
                if (d != null) {
                    d.close();
                }
                return "CLOSED";
            }
            default:
                return null;
        }
    }

    // ---- recipes/nodes: PersistentNode and GroupMember --------------------------------------

    private final Map<String, org.apache.curator.framework.recipes.nodes.PersistentNode> pnodes = new HashMap<>();
    private final Map<String, org.apache.curator.framework.recipes.nodes.GroupMember> groupMembers = new HashMap<>();

    /** The answer to a recipes/nodes command, or null when cmd is not one. */
    private String nodesCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "pnode": {
                arity(cmd, 6);
                org.apache.curator.framework.recipes.nodes.PersistentNode node =
                        new org.apache.curator.framework.recipes.nodes.PersistentNode(client, CreateMode.valueOf(cmd[3]),
                                cmd[4].equals("1"), cmd[2], cmd[5].getBytes(StandardCharsets.UTF_8));
                node.start();
                pnodes.put(cmd[1], node);
                if (!node.waitForInitialCreate(10, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("not created within 10 s");
                }
                return "PNODE " + node.getActualPath();
            }
            case "pnodeclose": {
                arity(cmd, 2);
                org.apache.curator.framework.recipes.nodes.PersistentNode node = pnodes.remove(cmd[1]);
                if (node == null) {
                    throw new IllegalArgumentException("no persistent node " + cmd[1]);
                }
                node.close();
                return "CLOSED";
            }
            case "member": {
                arity(cmd, 5);
                org.apache.curator.framework.recipes.nodes.GroupMember member =
                        new org.apache.curator.framework.recipes.nodes.GroupMember(client, cmd[2], cmd[3],
                                cmd[4].getBytes(StandardCharsets.UTF_8));
                member.start();
                groupMembers.put(cmd[1], member);
                return "MEMBER";
            }
            case "members": {
                arity(cmd, 2);
                org.apache.curator.framework.recipes.nodes.GroupMember member = groupMembers.get(cmd[1]);
                if (member == null) {
                    throw new IllegalArgumentException("no group member " + cmd[1]);
                }
                StringBuilder out = new StringBuilder("MEMBERS ");
                for (Map.Entry<String, byte[]> e : new java.util.TreeMap<>(member.getCurrentMembers()).entrySet()) {
                    if (out.length() > "MEMBERS ".length()) out.append(',');
                    out.append(e.getKey()).append('=').append(new String(e.getValue(), StandardCharsets.UTF_8));
                }
                return out.toString();
            }
            case "memberclose": {
                arity(cmd, 2);
                org.apache.curator.framework.recipes.nodes.GroupMember member = groupMembers.remove(cmd[1]);
                if (member == null) {
                    throw new IllegalArgumentException("no group member " + cmd[1]);
                }
                member.close();
                return "CLOSED";
            }
            default:
                return null;
        }
    }

    // ---- caches (tests/testsuite/cache/curator_interop.rs) -------------------------------------
    //   cwrite KIND PATH DATA   -> WROTE <created path>   (KIND persistent|protected|sequential|ttl:
    //                              persistent, ephemeral sequential withProtection, persistent
    //                              sequential, persistent with a 60 s TTL; parents created)
    //   cset PATH DATA          -> SET
    //   cdelete PATH            -> DELETED
    //   cache NAME PATH         -> STARTED   (a Curator CuratorCache of PATH named NAME)
    //   cachedump NAME          -> CACHE <path>=<hex data>;...   (sorted by path; "CACHE " if empty)

    private final Map<String, org.apache.curator.framework.recipes.cache.CuratorCache> caches = new HashMap<>();

    private String cacheCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "cwrite": {
                arity(cmd, 4);
                byte[] data = cmd[3].getBytes(StandardCharsets.UTF_8);
                String created;
                switch (cmd[1]) {
                    case "persistent":
                        created = client.create().creatingParentsIfNeeded().forPath(cmd[2], data);
                        break;
                    case "protected":
                        created = client.create().creatingParentsIfNeeded().withProtection()
                                .withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(cmd[2], data);
                        break;
                    case "sequential":
                        created = client.create().creatingParentsIfNeeded()
                                .withMode(CreateMode.PERSISTENT_SEQUENTIAL).forPath(cmd[2], data);
                        break;
                    case "ttl":
                        created = client.create().withTtl(60_000).creatingParentsIfNeeded()
                                .withMode(CreateMode.PERSISTENT_WITH_TTL).forPath(cmd[2], data);
                        break;
                    default:
                        throw new IllegalArgumentException("unknown kind " + cmd[1]);
                }
                return "WROTE " + created;
            }
            case "cset": {
                arity(cmd, 3);
                client.setData().forPath(cmd[1], cmd[2].getBytes(StandardCharsets.UTF_8));
                return "SET";
            }
            case "cdelete": {
                arity(cmd, 2);
                client.delete().forPath(cmd[1]);
                return "DELETED";
            }
            case "cache": {
                arity(cmd, 3);
                org.apache.curator.framework.recipes.cache.CuratorCache cache =
                        org.apache.curator.framework.recipes.cache.CuratorCache.build(client, cmd[2]);
                java.util.concurrent.CountDownLatch initialized = new java.util.concurrent.CountDownLatch(1);
                cache.listenable().addListener(org.apache.curator.framework.recipes.cache.CuratorCacheListener.builder()
                        .forInitialized(initialized::countDown).build());
                cache.start();
                if (!initialized.await(20, TimeUnit.SECONDS)) {
                    throw new IllegalStateException("the Curator cache did not initialise");
                }
                caches.put(cmd[1], cache);
                return "STARTED";
            }
            case "cachedump": {
                arity(cmd, 2);
                org.apache.curator.framework.recipes.cache.CuratorCache cache = caches.get(cmd[1]);
                if (cache == null) {
                    throw new IllegalArgumentException("no cache " + cmd[1]);
                }
                java.util.TreeMap<String, String> nodes = new java.util.TreeMap<>();
                cache.stream().forEach(d -> {
                    StringBuilder hex = new StringBuilder();
                    for (byte b : d.getData() == null ? new byte[0] : d.getData()) {
                        hex.append(String.format("%02x", b));
                    }
                    nodes.put(d.getPath(), hex.toString());
                });
                StringBuilder answer = new StringBuilder("CACHE ");
                for (Map.Entry<String, String> e : nodes.entrySet()) {
                    answer.append(e.getKey()).append('=').append(e.getValue()).append(';');
                }
                return answer.toString();
            }
            default:
                return null;
        }
    }

    /** Waits up to MS for a pending result: the result, "PENDING", or "ERROR <cause>". */
    private static String awaitPending(Future<String> pending, String ms) throws InterruptedException {
        try {
            return pending.get(Long.parseLong(ms), TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            return "PENDING";
        } catch (ExecutionException e) {
            return "ERROR " + e.getCause();
        }
    }

    private SemHandle existingSem(String name) {
        SemHandle h = semaphores.get(name);
        if (h == null) {
            throw new IllegalArgumentException("no semaphore " + name);
        }
        return h;
    }

    /**
     * THREADS threads, each N times: take a lease, create an EPHEMERAL_SEQUENTIAL marker
     * MARKERS/curator-, list MARKERS (the count is a lower bound of the holders at that moment,
     * since a marker lives only while its lease is held), hold HOLD_MS, delete the marker and
     * return the lease. Counts how often a Rust marker (rust-) was listed beside ours.
     */
    private String semCritical(InterProcessSemaphoreV2 semaphore, int threads, int n, String markers, long holdMs)
            throws Exception {
        try {
            client.create().creatingParentsIfNeeded().forPath(markers);
        } catch (KeeperException.NodeExistsException e) {
            // the other side created it first
        }
        AtomicInteger max = new AtomicInteger();
        AtomicInteger mixed = new AtomicInteger();
        List<Future<Void>> running = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            running.add(background.submit(() -> {
                for (int i = 0; i < n; i++) {
                    Lease lease = semaphore.acquire(30, TimeUnit.SECONDS);
                    if (lease == null) {
                        throw new IllegalStateException("no lease within 30 s");
                    }
                    try {
                        String marker = client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL)
                                .forPath(markers + "/curator-");
                        List<String> seen = client.getChildren().forPath(markers);
                        max.accumulateAndGet(seen.size(), Math::max);
                        if (seen.stream().anyMatch(m -> m.startsWith("rust-"))) {
                            mixed.incrementAndGet();
                        }
                        Thread.sleep(holdMs);
                        client.delete().forPath(marker);
                    } finally {
                        lease.close();
                    }
                }
                return null;
            }));
        }
        for (Future<Void> f : running) {
            f.get();
        }
        return "DONE max=" + max.get() + " mixed=" + mixed.get();
    }

    /**
     * N times: take the lock, then do a read-modify-write of a counter node under an overlap
     * detector that does not rely on the lock at all:
     *   - an EPHEMERAL marker node COUNTER-inside is created on entry and deleted on exit; if it
     *     already exists, somebody else is inside at the same time (ZooKeeper's create is atomic);
     *   - the counter is written with the version read, so an interleaved write shows as BadVersion
     *     (the increment is then written blindly, so a lost update also shows in the final count).
     * Returns the number of overlaps seen.
     */
    private int critical(InterProcessLock mutex, int n, String counter) throws Exception {
        String marker = counter + "-inside";
        try {
            client.create().creatingParentsIfNeeded().forPath(counter, "0".getBytes(StandardCharsets.UTF_8));
        } catch (KeeperException.NodeExistsException e) {
            // the other side created it first
        }
        int overlaps = 0;
        for (int i = 0; i < n; i++) {
            if (!mutex.acquire(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("iteration " + i + ": lock not acquired within 30 s");
            }
            try {
                boolean mine = false;
                try {
                    client.create().withMode(CreateMode.EPHEMERAL).forPath(marker);
                    mine = true;
                } catch (KeeperException.NodeExistsException e) {
                    overlaps++;
                }
                Stat stat = new Stat();
                byte[] data = client.getData().storingStatIn(stat).forPath(counter);
                int value = Integer.parseInt(new String(data, StandardCharsets.UTF_8).trim());
                Thread.sleep(1);
                byte[] next = Integer.toString(value + 1).getBytes(StandardCharsets.UTF_8);
                try {
                    client.setData().withVersion(stat.getVersion()).forPath(counter, next);
                } catch (KeeperException.BadVersionException e) {
                    overlaps++;
                    client.setData().forPath(counter, next);
                }
                if (mine) {
                    client.delete().forPath(marker);
                }
            } finally {
                mutex.release();
            }
        }
        return overlaps;
    }

    private void startLoop(String name, Callable<String> loop) {
        Future<String> running = loops.get(name);
        if (running != null && !running.isDone()) {
            throw new IllegalStateException("loop " + name + " is already running");
        }
        loops.put(name, background.submit(loop));
    }

    /** Wall-clock time in epoch microseconds: comparable with the test's clock (same machine). */
    private static long epochMicros() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** What a loop reports: its holds (with wall-clock bounds) and what it found wrong. */
    static final class LoopLog {
        int holds;
        int timeouts;
        int max;
        final StringBuilder log = new StringBuilder();
        final List<String> violations = new ArrayList<>();

        void hold(String kind, long token, long start, long end) {
            holds++;
            log.append(log.length() == 0 ? "" : ";").append(kind).append(':').append(token).append(':')
                    .append(start).append(':').append(end);
        }

        String result() {
            StringBuilder out = new StringBuilder("DONE holds=" + holds + " timeouts=" + timeouts + " violations="
                    + violations.size() + " max=" + max + " log=" + log);
            for (String v : violations) {
                out.append(" violation: ").append(v);
            }
            return out.toString();
        }
    }

    /** A timeout for one acquire: mostly long, sometimes so short that the acquire gives up midway. */
    private static long acquireTimeoutMs(Random rnd) {
        return rnd.nextInt(4) == 0 ? rnd.nextInt(30) : 20_000;
    }

    /**
     * ROUNDS times on one thread: take the read lock (2 in 3) or the write lock of PATH with a
     * random timeout; while holding, read the version of the node DATA, hold up to HOLD_MS, then
     * prove to the server that the hold was respected, in one transaction that also checks that our
     * lock node still exists: a writer sets DATA with the version it read (so any other write in
     * between fails with BadVersion), a reader checks DATA's version (so any write during the read
     * hold fails the check). A BadVersion is a violation; the holds are reported with wall-clock
     * bounds (start after the acquire returned, end after the transaction, before the release).
     */
    private String rwLoop(String path, int rounds, String data, long holdMs, long seed) throws Exception {
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        Random rnd = new Random(seed);
        LoopLog out = new LoopLog();
        for (int i = 0; i < rounds; i++) {
            boolean write = rnd.nextInt(3) == 0;
            InterProcessMutex lock = write ? rw.writeLock() : rw.readLock();
            if (!lock.acquire(acquireTimeoutMs(rnd), TimeUnit.MILLISECONDS)) {
                out.timeouts++;
                continue;
            }
            long start = epochMicros();
            try {
                String node = lockPathOf(lock, path);
                long token = client.checkExists().forPath(node).getCzxid();
                Stat stat = new Stat();
                client.getData().storingStatIn(stat).forPath(data);
                Thread.sleep(rnd.nextInt((int) holdMs + 1));
                CuratorOp held = client.transactionOp().check().forPath(node);
                CuratorOp proof = write
                        ? client.transactionOp().setData().withVersion(stat.getVersion())
                                .forPath(data, ("curator " + i).getBytes(StandardCharsets.UTF_8))
                        : client.transactionOp().check().withVersion(stat.getVersion()).forPath(data);
                try {
                    client.transaction().forOperations(held, proof);
                } catch (KeeperException.BadVersionException e) {
                    out.violations.add("curator " + (write ? "writer" : "reader") + " round " + i + " (" + node
                            + "): a write landed on " + data + " during the hold (read version " + stat.getVersion()
                            + ")");
                }
                out.hold(write ? "W" : "R", token, start, epochMicros());
            } finally {
                lock.release();
            }
        }
        return out.result();
    }

    /**
     * ROUNDS times on one thread: take a lease with a random timeout; while holding, create an
     * EPHEMERAL_SEQUENTIAL marker MARKERS/curator- in this session and list MARKERS (a marker lives
     * only while its lease is held, so more than LEASES markers is a violation that trusts neither
     * library), hold up to HOLD_MS, delete the marker, report the hold, return the lease.
     */
    private String semLoop(String path, int leases, int rounds, String markers, long holdMs, long seed)
            throws Exception {
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, leases);
        Random rnd = new Random(seed);
        LoopLog out = new LoopLog();
        for (int i = 0; i < rounds; i++) {
            Lease lease = semaphore.acquire(acquireTimeoutMs(rnd), TimeUnit.MILLISECONDS);
            if (lease == null) {
                out.timeouts++;
                continue;
            }
            long start = epochMicros();
            try {
                String node = path + "/leases/" + lease.getNodeName();
                long token = client.checkExists().forPath(node).getCzxid();
                String marker = client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(markers + "/curator-");
                List<String> seen = client.getChildren().forPath(markers);
                out.max = Math.max(out.max, seen.size());
                if (seen.size() > leases) {
                    out.violations.add("curator round " + i + ": " + seen.size() + " holders of " + leases + " leases: "
                            + seen);
                }
                Thread.sleep(rnd.nextInt((int) holdMs + 1));
                client.delete().forPath(marker);
                out.hold("L", token, start, epochMicros());
            } finally {
                lease.close();
            }
        }
        return out.result();
    }

    // ------------------------------------------------------------------------------------------
    // Barriers: DistributedDoubleBarrier members and DistributedBarrier (commands db*, barrier*).
    // Each double-barrier member is one instance with its own single thread (Curator's enter and
    // leave synchronize on the instance); every call runs in the background, its answer comes
    // from dbawait.
    // ------------------------------------------------------------------------------------------

    private static final class BarrierMember {
        final org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier barrier;
        final ExecutorService thread = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "barrier-member");
            t.setDaemon(true);
            return t;
        });
        Future<String> pending;

        BarrierMember(CuratorFramework client, String path, int qty) {
            this.barrier = new org.apache.curator.framework.recipes.barriers.DistributedDoubleBarrier(client, path, qty);
        }
    }

    private final Map<String, BarrierMember> barrierMembers = new HashMap<>();
    private final Map<String, Future<String>> barrierWaits = new HashMap<>();

    private String barrierCommand(String[] cmd) throws Exception {
        switch (cmd[0]) {
            case "dbenter": {
                arity(cmd, 5);
                BarrierMember m = new BarrierMember(client, cmd[2], Integer.parseInt(cmd[3]));
                long ms = Long.parseLong(cmd[4]);
                barrierMembers.put(cmd[1], m);
                m.pending = m.thread.submit(() -> "ENTERED " + m.barrier.enter(ms, TimeUnit.MILLISECONDS));
                return "SPAWNED";
            }
            case "dbleave": {
                arity(cmd, 3);
                BarrierMember m = barrierMembers.get(cmd[1]);
                if (m == null) {
                    throw new IllegalArgumentException("no barrier member " + cmd[1]);
                }
                long ms = Long.parseLong(cmd[2]);
                m.pending = m.thread.submit(() -> "LEFT " + m.barrier.leave(ms, TimeUnit.MILLISECONDS));
                return "SPAWNED";
            }
            case "dbawait": {
                arity(cmd, 3);
                BarrierMember m = barrierMembers.get(cmd[1]);
                Future<String> pending = m != null ? m.pending : barrierWaits.get(cmd[1]);
                if (pending == null) {
                    throw new IllegalArgumentException("nothing running for " + cmd[1]);
                }
                return awaitPending(pending, cmd[2]);
            }
            case "barrierset": {
                arity(cmd, 2);
                new org.apache.curator.framework.recipes.barriers.DistributedBarrier(client, cmd[1]).setBarrier();
                return "SET";
            }
            case "barrierremove": {
                arity(cmd, 2);
                new org.apache.curator.framework.recipes.barriers.DistributedBarrier(client, cmd[1]).removeBarrier();
                return "REMOVED";
            }
            case "barrierwait": {
                arity(cmd, 4);
                org.apache.curator.framework.recipes.barriers.DistributedBarrier b =
                        new org.apache.curator.framework.recipes.barriers.DistributedBarrier(client, cmd[2]);
                long ms = Long.parseLong(cmd[3]);
                barrierWaits.put(cmd[1], background.submit(() -> "PASSED " + b.waitOnBarrier(ms, TimeUnit.MILLISECONDS)));
                return "SPAWNED";
            }
            default:
                throw new IllegalArgumentException("unknown barrier command " + cmd[0]);
        }
    }
}
