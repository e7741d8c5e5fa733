package dev.rollcall.demo;

import io.quarkus.logging.LoggingFilter;
import java.util.logging.Filter;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.jboss.logmanager.ExtLogRecord;

/**
 * The demo's console filter: of Flyway's INFO lines (the database, the schema history, one line per
 * migration) only the summary is kept, "Successfully applied N migrations …" or "Schema … is up to
 * date". Flyway's warnings and errors, and everyone else's lines, pass. Only the demo turns it on
 * ({@code quarkus.log.console.filter}); a production log keeps every migration line.
 */
@LoggingFilter(name = OneFlywayLine.NAME)
public final class OneFlywayLine implements Filter {

  /** The filter's name in {@code quarkus.log.console.filter}. */
  public static final String NAME = "one-flyway-line";

  /** The setting that turns it on. */
  static final String SETTING = "quarkus.log.console.filter";

  @Override
  public boolean isLoggable(LogRecord record) {
    String logger = record.getLoggerName();
    if (logger == null
        || !logger.startsWith("org.flywaydb")
        || record.getLevel().intValue() > Level.INFO.intValue()) {
      return true;
    }
    return isSummary(
        record instanceof ExtLogRecord ext ? ext.getFormattedMessage() : record.getMessage());
  }

  /** Flyway's one line that says where the schema stands. */
  static boolean isSummary(String message) {
    return message != null
        && (message.startsWith("Successfully applied")
            || (message.startsWith("Schema ") && message.contains("is up to date")));
  }
}
