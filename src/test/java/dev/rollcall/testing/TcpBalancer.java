package dev.rollcall.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A TCP load balancer on 127.0.0.1, as a Kubernetes Service is in front of the service replicas:
 * each new connection goes to the next backend in turn; a backend taken out gets no new
 * connections, and the connections it held end when it dies. Clients see exactly what they would
 * see in production when a replica is killed: a reset mid-request, then a live replica on retry.
 * With one backend it is a network path of the test's own, which can be cut and healed.
 */
public final class TcpBalancer implements AutoCloseable {

  private final ServerSocket server;
  private final List<Integer> backends = new CopyOnWriteArrayList<>();
  private final AtomicInteger next = new AtomicInteger();
  private final List<Socket> open = new CopyOnWriteArrayList<>();
  private final List<Socket> parked = new CopyOnWriteArrayList<>();
  private volatile boolean closed;
  private volatile boolean cut;

  public TcpBalancer() throws IOException {
    server = new ServerSocket();
    server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
    Thread acceptor = new Thread(this::accept, "balancer-accept");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** The balancer's own address: {@code http://127.0.0.1:<port>}. */
  public URI url() {
    return URI.create("http://127.0.0.1:" + server.getLocalPort());
  }

  /** Routes new connections to this backend too. */
  public void add(URI backend) {
    backends.add(backend.getPort());
  }

  /** Routes no new connection to this backend (those it holds live until it closes them). */
  public void remove(URI backend) {
    backends.remove(Integer.valueOf(backend.getPort()));
  }

  /**
   * Stops forwarding, as a network path that drops every packet: the connections open now are cut,
   * new ones are accepted and never answered, until {@link #heal}.
   */
  public void cut() {
    cut = true;
    open.forEach(TcpBalancer::closeQuietly);
  }

  /** Forwards again; the connections left unanswered meanwhile are closed. */
  public void heal() {
    cut = false;
    parked.forEach(TcpBalancer::closeQuietly);
    parked.clear();
  }

  private void accept() {
    while (!closed) {
      Socket client;
      try {
        client = server.accept();
      } catch (IOException e) {
        return; // closed
      }
      if (cut) {
        parked.add(client);
        continue;
      }
      Socket backend = connectToABackend();
      if (backend == null) {
        closeQuietly(client);
        continue;
      }
      open.add(client);
      open.add(backend);
      pump(client, backend);
      pump(backend, client);
    }
  }

  private Socket connectToABackend() {
    List<Integer> now = List.copyOf(backends);
    for (int i = 0; i < now.size(); i++) {
      int port = now.get(Math.floorMod(next.getAndIncrement(), now.size()));
      try {
        return new Socket(InetAddress.getLoopbackAddress(), port);
      } catch (IOException refused) {
        // being restarted: try the next one
      }
    }
    return null;
  }

  private void pump(Socket from, Socket to) {
    Thread t =
        new Thread(
            () -> {
              byte[] buffer = new byte[16 * 1024];
              try (InputStream in = from.getInputStream()) {
                OutputStream out = to.getOutputStream();
                for (int n; (n = in.read(buffer)) >= 0; ) {
                  out.write(buffer, 0, n);
                  out.flush();
                }
              } catch (IOException e) {
                // one side ended: end both
              } finally {
                closeQuietly(from);
                closeQuietly(to);
                open.remove(from);
                open.remove(to);
              }
            },
            "balancer-pump");
    t.setDaemon(true);
    t.start();
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // already closed
    }
  }

  @Override
  public void close() throws IOException {
    closed = true;
    server.close();
    open.forEach(TcpBalancer::closeQuietly);
    parked.forEach(TcpBalancer::closeQuietly);
  }
}
