package dev.rollcall;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.assignableTo;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAnyPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.methods;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.junit.jupiter.api.Assertions.assertEquals;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaMethod;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import com.tngtech.archunit.library.Architectures.LayeredArchitecture;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The map of the house ({@code docs/architecture.md}, "Where things live"), as rules the build
 * checks: which package may use which, no cycles between packages, no SQL in the HTTP layer, each
 * table written from the classes that own it (every other writer named with its reason), one clock,
 * and every test that needs neither the service nor a database in the unit tier. When a rule here
 * changes, the map in the docs changes with it.
 */
@Tag("unit")
class ArchitectureTest {

  private static final String ROOT = "dev.rollcall";

  private static final JavaClasses MAIN =
      new ClassFileImporter()
          .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
          .importPackages(ROOT);

  private static final JavaClasses TESTS =
      new ClassFileImporter()
          .withImportOption(ImportOption.Predefined.ONLY_INCLUDE_TESTS)
          .importPackages(ROOT);

  /** The reactive SQL client: connections, pools, statements and rows. */
  private static final String[] SQL_CLIENT = {
    "io.vertx.mutiny.sqlclient..",
    "io.vertx.mutiny.pgclient..",
    "io.vertx.sqlclient..",
    "io.vertx.pgclient.."
  };

  /** Hibernate Reactive and Panache: the control plane's entities and their queries. */
  private static final String[] ORM = {
    "org.hibernate..", "io.quarkus.hibernate..", "jakarta.persistence.."
  };

  // ---------------------------------------------------------------------------------------------
  // The layers: who may use whom. Read top to bottom: HTTP, then services, then what they share.

  /**
   * Each package and the packages it may use, as the table of {@code docs/architecture.md} lists
   * them. The root package's {@code Main} may start the demo's database before the service boots,
   * and filters the global meter registry before anything registers a meter in it.
   */
  private static final Map<String, List<String>> USES = new LinkedHashMap<>();

  static {
    USES.put("api", List.of("admin", "recovery", "registry", "tracing", "config", "error"));
    USES.put("admin", List.of("model", "registry", "source", "database", "config", "error"));
    USES.put("health", List.of("source", "database"));
    USES.put(
        "recovery",
        List.of(
            "registry",
            "source",
            "queue",
            "database",
            "metrics",
            "concurrency",
            "sql",
            "tracing",
            "config",
            "error"));
    // The registry learns an instance's queue workers through its namespace's source.
    USES.put(
        "registry",
        List.of("source", "queue", "database", "metrics", "sql", "tracing", "config", "error"));
    USES.put("source", List.of("queue", "database", "sql", "config", "error"));
    USES.put("queue", List.of("sql"));
    // The per-namespace series start at zero for every configured namespace's source.
    USES.put("metrics", List.of("source", "database"));
    // Which database serves each namespace, its pool and its migrations.
    USES.put("database", List.of("config", "error"));
    for (String leaf :
        List.of("model", "concurrency", "sql", "tracing", "config", "error", "demo")) {
      USES.put(leaf, List.of());
    }
  }

  @Test
  void eachPackageUsesOnlyThePackagesTheMapAllows() {
    LayeredArchitecture layers =
        layeredArchitecture().consideringOnlyDependenciesInLayers().layer("main").definedBy(ROOT);
    for (String p : USES.keySet()) {
      layers = layers.layer(p).definedBy(ROOT + "." + p + "..");
    }
    layers = layers.whereLayer("main").mayOnlyAccessLayers("demo", "metrics");
    for (Map.Entry<String, List<String>> e : USES.entrySet()) {
      layers =
          e.getValue().isEmpty()
              ? layers.whereLayer(e.getKey()).mayNotAccessAnyLayer()
              : layers
                  .whereLayer(e.getKey())
                  .mayOnlyAccessLayers(e.getValue().toArray(String[]::new));
    }
    layers.check(MAIN);
  }

  private static final Pattern MAP_ROW =
      Pattern.compile("^\\| `([a-z]+)` \\|.*\\| ([^|]*) \\|$", Pattern.MULTILINE);

  @Test
  void theMapInTheDocsListsThePackagesAndWhatEachUses() throws IOException {
    Map<String, List<String>> documented = new LinkedHashMap<>();
    String doc = Files.readString(Path.of("docs", "architecture.md"));
    int start = doc.indexOf("## Packages");
    String section = doc.substring(start, doc.indexOf("\n## ", start + 1));
    Matcher m = MAP_ROW.matcher(section);
    while (m.find()) {
      String uses = m.group(2).trim();
      documented.put(
          m.group(1),
          uses.equals("—")
              ? List.of()
              : Stream.of(uses.split(",")).map(u -> u.trim().replace("`", "")).toList());
    }
    assertEquals(USES, documented, "docs/architecture.md, \"Packages\", and the rules");
  }

  /** Every package under the root is on the map. */
  @Test
  void everyPackageIsOnTheMap() {
    Set<String> packages = new TreeSet<>();
    for (JavaClass c : MAIN) {
      String name = c.getPackageName();
      if (name.startsWith(ROOT + ".")) {
        packages.add(name.substring(ROOT.length() + 1).split("\\.")[0]);
      }
    }
    assertEquals(new TreeSet<>(USES.keySet()), packages);
  }

  @Test
  void noPackageDependsOnItselfThroughOthers() {
    slices().matching(ROOT + ".(*)..").should().beFreeOfCycles().check(MAIN);
  }

  // ---------------------------------------------------------------------------------------------
  // SQL: where statements are written.

  @Test
  void resourcesRunNoSql() {
    noClasses()
        .that()
        .resideInAPackage(ROOT + ".api..")
        .should()
        .dependOnClassesThat(
            resideInAnyPackage(
                    concat(ORM, "io.vertx.mutiny.sqlclient..", "io.vertx.mutiny.pgclient.."))
                .or(resideInAnyPackage(ROOT + ".sql..", ROOT + ".model..")))
        .because("a resource parses, calls one service method and maps the result")
        .check(MAIN);
  }

  /**
   * The one exception to {@link #resourcesRunNoSql}: the problem mapper knows the SQL client's
   * failures, to answer 503 when the database is down, and nothing else of it.
   */
  @Test
  void resourcesKnowOnlyTheSqlClientsFailures() {
    classes()
        .that()
        .resideInAPackage(ROOT + ".api..")
        .should()
        .onlyDependOnClassesThat(
            not(resideInAnyPackage(SQL_CLIENT)).or(assignableTo(Throwable.class)))
        .check(MAIN);
  }

  @Test
  void statementsRunOnlyInThePackagesThatOwnTables() {
    noClasses()
        .that()
        .resideOutsideOfPackages(
            ROOT + ".registry..",
            ROOT + ".recovery..",
            ROOT + ".source..",
            ROOT + ".queue..",
            // Read-only: readiness asks whether the schema is migrated and every source readable.
            ROOT + ".health..",
            // Read-only: the state gauges count epochs and instances.
            ROOT + ".metrics..",
            // Opens each database's pool; runs no statement of its own.
            ROOT + ".database..",
            // The problem mapper's failures (resourcesKnowOnlyTheSqlClientsFailures).
            ROOT + ".api..")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage(SQL_CLIENT)
        .check(MAIN);
  }

  @Test
  void entitiesAndTheirQueriesStayInTheControlPlanesReadModels() {
    noClasses()
        .that()
        .resideOutsideOfPackages(ROOT + ".model..", ROOT + ".admin..")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage(ORM)
        .because("the hot path is explicit SQL through the reactive client; HQL reads views")
        .check(MAIN);
  }

  /**
   * Who writes each table of the {@code rollcall} schema, and no other class: one writer a table,
   * but for {@code instances}, whose jobs (registration, the lease, endings, the session marks) are
   * one class each, and each transition in one of them ({@link #anInstanceEndsOnlyThroughEndings}).
   * Read from the statements in {@code src/main/java} ({@code INSERT INTO}, {@code UPDATE}, {@code
   * DELETE FROM}); a writer listed here that no longer writes fails too, so the list stays true.
   * {@link #RETENTION} may delete from any table.
   */
  private static final List<Table> TABLES =
      List.of(
          table("instances")
              .writtenBy(
                  "registry.Registrations",
                  "registry.Heartbeats",
                  "registry.Endings",
                  "registry.SessionLiveness"),
          table("coordinator_beat").writtenBy("registry.Outages"),
          table("epochs").writtenBy("recovery.Epochs"),
          table("batches").writtenBy("recovery.Batches"),
          table("batch_runs").writtenBy("recovery.Batches"),
          table("deferred").writtenBy("recovery.Deferrals"),
          table("ledger").writtenBy("recovery.Ledger"),
          table("epoch_counts").writtenBy("recovery.Ledger"),
          table("epoch_wake_jobs").writtenBy("source.WakeJobs"),
          table("housekeeping").writtenBy("recovery.Housekeeping"),
          table("namespace_settings").writtenBy("recovery.BootPasses"),
          table("ownership").writtenBy("registry.Ownership"),
          table("ownership_messages").writtenBy("registry.Ownership"),
          table("queue_workers").writtenBy("queue.GraphileQueue"));

  /** Deletes the rows that aged out of every table it keeps, and writes nothing else. */
  private static final String RETENTION = "recovery.Retention";

  private static final Pattern WRITE =
      Pattern.compile("(?:INSERT INTO|UPDATE|DELETE FROM)\\s+rollcall\\.([a-z_]+)");

  @Test
  void eachTableIsWrittenOnlyByTheClassesTheMapNames() throws IOException {
    Map<String, Set<String>> written = new TreeMap<>();
    Path base = Path.of("src", "main", "java", "dev", "rollcall");
    try (Stream<Path> files = Files.walk(base)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
        String name = base.relativize(f).toString().replace('/', '.').replace('\\', '.');
        String writer = name.substring(0, name.length() - ".java".length());
        Matcher m = WRITE.matcher(Files.readString(f));
        while (m.find()) {
          if (!writer.equals(RETENTION)) {
            written.computeIfAbsent(m.group(1), t -> new TreeSet<>()).add(writer);
          }
        }
      }
    }
    Map<String, Set<String>> declared = new TreeMap<>();
    for (Table t : TABLES) {
      declared.put(t.name, new TreeSet<>(t.writers));
    }
    assertEquals(declared, written, "the writers of each rollcall table, by the map and in fact");
  }

  private static final Pattern TABLE_ROW =
      Pattern.compile("^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\|([^|]*)\\|$", Pattern.MULTILINE);

  private static final Pattern CLASS_NAME = Pattern.compile("`([A-Z][A-Za-z]+)`");

  /**
   * The table of writers in {@code docs/architecture.md} names the same classes as {@link #TABLES}
   * does: a writer added to one and not the other fails the build.
   */
  @Test
  void theMapInTheDocsNamesEachTablesWriters() throws IOException {
    Map<String, Set<String>> documented = new TreeMap<>();
    String doc = Files.readString(Path.of("docs", "architecture.md"));
    int start = doc.indexOf("| table | writer |");
    Matcher m = TABLE_ROW.matcher(doc.substring(start, doc.indexOf("\n\n", start)));
    while (m.find()) {
      for (String table : m.group(1).replace("`", "").split(",\\s*")) {
        documented.put(table, classNames(m.group(2)));
      }
    }
    Map<String, Set<String>> declared = new TreeMap<>();
    for (Table t : TABLES) {
      declared.put(t.name, simpleNames(t.writers));
    }
    assertEquals(declared, documented, "docs/architecture.md, each table's writers, and the rules");
  }

  private static Set<String> classNames(String cell) {
    Set<String> names = new TreeSet<>();
    Matcher m = CLASS_NAME.matcher(cell);
    while (m.find()) {
      names.add(m.group(1));
    }
    return names;
  }

  private static Set<String> simpleNames(List<String> classes) {
    Set<String> names = new TreeSet<>();
    for (String c : classes) {
      names.add(c.substring(c.lastIndexOf('.') + 1));
    }
    return names;
  }

  /** An instance's end, as a statement writes it: it left or it died. */
  private static final Pattern INSTANCE_END = Pattern.compile("SET state = '(?:dead|left)'");

  /**
   * Each transition of an instance once: a death (by the reaper's lease expiry, the session check's
   * lost session or an operator's eviction) and a leave are written by {@code registry.Endings}
   * alone, after the end lock it takes.
   */
  @Test
  void anInstanceEndsOnlyThroughEndings() throws IOException {
    Set<String> writers = new TreeSet<>();
    Path base = Path.of("src", "main", "java", "dev", "rollcall");
    try (Stream<Path> files = Files.walk(base)) {
      for (Path f : files.filter(p -> p.toString().endsWith(".java")).toList()) {
        if (INSTANCE_END.matcher(Files.readString(f)).find()) {
          writers.add(base.relativize(f).toString().replace('\\', '/'));
        }
      }
    }
    assertEquals(Set.of("registry/Endings.java"), writers);
  }

  /** One table of the map and the classes that write it. */
  private record Table(String name, List<String> writers) {
    Table writtenBy(String... classes) {
      return new Table(name, List.of(classes));
    }
  }

  private static Table table(String name) {
    return new Table(name, List.of());
  }

  // ---------------------------------------------------------------------------------------------
  // Methods a reader can follow.

  @Test
  void noMethodTakesMoreThanFiveParameters() {
    methods()
        .that()
        .doNotHaveModifier(JavaModifier.SYNTHETIC)
        .should(
            new ArchCondition<>("take at most five parameters") {
              @Override
              public void check(JavaMethod m, ConditionEvents events) {
                int n = m.getRawParameterTypes().size();
                events.add(
                    new SimpleConditionEvent(
                        m, n <= 5, m.getFullName() + " takes " + n + " parameters"));
              }
            })
        .check(MAIN);
  }

  // ---------------------------------------------------------------------------------------------
  // One clock.

  @Test
  void recoveryAndTheRegistryDecideByTheDatabasesClock() {
    noClasses()
        .that()
        .resideInAnyPackage(ROOT + ".recovery..", ROOT + ".registry..")
        .should()
        .callMethod(Instant.class, "now")
        .orShould()
        .callMethod(OffsetDateTime.class, "now")
        .orShould()
        .callMethod(LocalDateTime.class, "now")
        .orShould()
        .callMethod(System.class, "currentTimeMillis")
        .orShould()
        .dependOnClassesThat()
        .areAssignableTo(Clock.class)
        .because("every lease and deadline is decided by now() in the statement that acts on it")
        .check(MAIN);
  }

  // ---------------------------------------------------------------------------------------------
  // The tiers of the tests.

  /**
   * Test support that reaches outside the JVM: a database (embedded or the service's), a service
   * process, the engine's Node.js tooling, or any other process.
   */
  private static final Set<String> OUTSIDE =
      Set.of(
          ROOT + ".testing.TestDatabase",
          ROOT + ".testing.Db",
          ROOT + ".testing.CleanSchema",
          ROOT + ".testing.RestartablePostgres",
          ROOT + ".testing.EngineFixture",
          ROOT + ".testing.ServiceProcess",
          ROOT + ".testing.NodeReplica",
          "io.zonky.test.db.postgres.embedded.EmbeddedPostgres",
          "java.sql.DriverManager",
          "java.lang.ProcessBuilder");

  /** The tags of the other tiers: each is run alone, or not by default. */
  private static final Set<String> OTHER_TIERS = Set.of("slow", "chaos", "compat", "benchmark");

  private static final DescribedPredicate<JavaClass> TEST_CLASSES =
      DescribedPredicate.describe(
          "test classes",
          c ->
              c.isTopLevelClass()
                  && c.getMethods().stream()
                      .anyMatch(
                          m ->
                              m.isAnnotatedWith("org.junit.jupiter.api.Test")
                                  || m.isAnnotatedWith(
                                      "org.junit.jupiter.params.ParameterizedTest")));

  private static final DescribedPredicate<JavaClass> BOOT_THE_SERVICE =
      DescribedPredicate.describe(
          "boot the service (@QuarkusTest)",
          c ->
              c.isMetaAnnotatedWith("io.quarkus.test.junit.QuarkusTest")
                  || c.isAnnotatedWith("io.quarkus.test.junit.QuarkusTest"));

  private static final DescribedPredicate<JavaClass> RUN_AS_INTEGRATION_TESTS =
      DescribedPredicate.describe(
          "run as integration tests (*IT)", c -> c.getSimpleName().endsWith("IT"));

  private static final DescribedPredicate<JavaClass> BELONG_TO_ANOTHER_TIER =
      DescribedPredicate.describe(
          "are tagged " + OTHER_TIERS, c -> tags(c).stream().anyMatch(OTHER_TIERS::contains));

  private static final DescribedPredicate<JavaClass> REACH_OUTSIDE_THE_JVM =
      DescribedPredicate.describe(
          "use a database or start a process (" + OUTSIDE + ")",
          c ->
              Stream.concat(
                      c.getDirectDependenciesFromSelf().stream(),
                      c.getTransitiveDependenciesFromSelf().stream())
                  .map(Dependency::getTargetClass)
                  .anyMatch(t -> OUTSIDE.contains(t.getName())));

  private static final ArchCondition<JavaClass> BE_TAGGED_UNIT =
      new ArchCondition<>("be tagged \"unit\"") {
        @Override
        public void check(JavaClass c, ConditionEvents events) {
          boolean unit = tags(c).contains("unit");
          events.add(
              new SimpleConditionEvent(
                  c,
                  unit,
                  c.getName() + (unit ? " is" : " is not") + " tagged \"unit\" (-Dgroups=unit)"));
        }
      };

  @Test
  void everyTestThatNeedsNeitherTheServiceNorADatabaseIsTaggedUnit() {
    classes()
        .that(TEST_CLASSES)
        .and(not(BOOT_THE_SERVICE))
        .and(not(RUN_AS_INTEGRATION_TESTS))
        .and(not(BELONG_TO_ANOTHER_TIER))
        .and(not(REACH_OUTSIDE_THE_JVM))
        .should(BE_TAGGED_UNIT)
        .because("-Dgroups=unit runs the rules in seconds, and must run all of them")
        .check(TESTS);
  }

  @Test
  void aTestTaggedUnitNeedsNeitherTheServiceNorADatabase() {
    DescribedPredicate<JavaClass> taggedUnit =
        DescribedPredicate.describe("are tagged \"unit\"", c -> tags(c).contains("unit"));
    classes()
        .that(TEST_CLASSES)
        .and(taggedUnit)
        .should(
            new ArchCondition<>("boot no service and reach nothing outside the JVM") {
              @Override
              public void check(JavaClass c, ConditionEvents events) {
                boolean outside = BOOT_THE_SERVICE.test(c) || REACH_OUTSIDE_THE_JVM.test(c);
                events.add(
                    new SimpleConditionEvent(
                        c,
                        !outside,
                        c.getName()
                            + " is tagged unit"
                            + (outside ? " but " : " and ")
                            + (outside ? "needs the service or a database" : "is pure")));
              }
            })
        .check(TESTS);
  }

  private static Set<String> tags(JavaClass c) {
    Set<String> tags = new TreeSet<>();
    c.tryGetAnnotationOfType(Tag.class).ifPresent(t -> tags.add(t.value()));
    c.tryGetAnnotationOfType(org.junit.jupiter.api.Tags.class)
        .ifPresent(ts -> Stream.of(ts.value()).map(Tag::value).forEach(tags::add));
    return tags;
  }

  private static String[] concat(String[] packages, String... more) {
    List<String> all = new ArrayList<>(List.of(packages));
    all.addAll(List.of(more));
    return all.toArray(String[]::new);
  }
}
