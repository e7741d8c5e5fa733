package dev.rollcall.source;

import io.smallrye.mutiny.Uni;
import io.vertx.mutiny.sqlclient.SqlClient;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Steps that may fail without failing the claim around them: a failed statement aborts a PostgreSQL
 * transaction, so such a step runs inside a savepoint that is rolled back on failure.
 */
public final class Savepoints {

  private Savepoints() {}

  /** The step's result, or empty (after {@code onFailure}) when it failed and was rolled back. */
  public static <T> Uni<Optional<T>> attempt(
      SqlClient client, String name, Uni<T> step, Consumer<Throwable> onFailure) {
    return client
        .query("SAVEPOINT " + name)
        .execute()
        .chain(() -> step)
        .chain(
            result ->
                client
                    .query("RELEASE SAVEPOINT " + name)
                    .execute()
                    .replaceWith(Optional.ofNullable(result)))
        .onFailure()
        .recoverWithUni(
            e -> {
              onFailure.accept(e);
              return client
                  .query("ROLLBACK TO SAVEPOINT " + name)
                  .execute()
                  .replaceWith(Optional.<T>empty());
            });
  }
}
