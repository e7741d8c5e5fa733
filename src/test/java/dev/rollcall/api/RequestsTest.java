package dev.rollcall.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.rollcall.api.dto.Dtos.InFlightEntry;
import dev.rollcall.error.Problems.InvalidRequest;
import dev.rollcall.registry.InFlight;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The checks of request values name the field that failed, down to an in-flight entry's part. */
@Tag("unit")
class RequestsTest {

  private static String refusal(Runnable check) {
    return assertThrows(InvalidRequest.class, check::run).getMessage();
  }

  @Test
  void aTextIsRefusedWhenBlankTooLongOrHoldingControlCharacters() {
    assertEquals("x", Requests.text("x", "name"));
    assertEquals(
        "'name' is required and must not be blank", refusal(() -> Requests.text(" ", "name")));
    assertEquals(
        "'name' is required and must not be blank", refusal(() -> Requests.text(null, "name")));
    assertEquals(
        "'name' is longer than 200 characters",
        refusal(() -> Requests.text("a".repeat(201), "name")));
    assertEquals("a".repeat(200), Requests.text("a".repeat(200), "name"));
    assertEquals(
        "'name' contains control characters", refusal(() -> Requests.text("a\u0000b", "name")));
    assertEquals(
        "'name' contains control characters", refusal(() -> Requests.text("ab\u001f", "name")));
    assertEquals("a b\u0020\u00e9", Requests.text("a b\u0020\u00e9", "name"));
  }

  @Test
  void anInFlightEntryIsNamedByItsIndexAndPart() {
    assertEquals(
        List.of(new InFlight("r1", null), new InFlight("r2", "m2")),
        Requests.inFlight(
            List.of(InFlightEntry.of("r1"), InFlightEntry.of("r2", "m2")), "inFlight", 10));
    assertEquals(
        "'inFlight[1]' contains control characters",
        refusal(
            () ->
                Requests.inFlight(
                    List.of(InFlightEntry.of("r1"), InFlightEntry.of("r\n2")), "inFlight", 10)));
    assertEquals(
        "'inFlight[0].runId' is required and must not be blank",
        refusal(() -> Requests.inFlight(List.of(InFlightEntry.of("", "m")), "inFlight", 10)));
    assertEquals(
        "'inFlight[0].messageId' is longer than 200 characters",
        refusal(
            () ->
                Requests.inFlight(
                    List.of(InFlightEntry.of("r", "m".repeat(201))), "inFlight", 10)));
    assertEquals(
        "'inFlight[1]' must be a run id or an object with a 'runId'",
        refusal(
            () -> Requests.inFlight(Arrays.asList(InFlightEntry.of("r"), null), "inFlight", 10)));
    assertEquals(
        "'inFlight' has more than 1 entries",
        refusal(
            () ->
                Requests.inFlight(
                    List.of(InFlightEntry.of("a"), InFlightEntry.of("b")), "inFlight", 1)));
  }
}
