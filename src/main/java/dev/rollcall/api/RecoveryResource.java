package dev.rollcall.api;

import dev.rollcall.api.dto.Dtos.BatchView;
import dev.rollcall.api.dto.Dtos.ClaimRequest;
import dev.rollcall.api.dto.Dtos.ClaimResponse;
import dev.rollcall.api.dto.Dtos.CompleteRequest;
import dev.rollcall.api.dto.Dtos.CompleteResponse;
import dev.rollcall.api.dto.Dtos.RunView;
import dev.rollcall.config.RollcallConfig;
import dev.rollcall.error.Problems.InvalidRequest;
import dev.rollcall.recovery.ClaimResult;
import dev.rollcall.recovery.ClaimService;
import dev.rollcall.recovery.CompletionService;
import dev.rollcall.recovery.LeasedBatch;
import dev.rollcall.recovery.PassTraces;
import dev.rollcall.registry.Caller;
import dev.rollcall.tracing.RecoveryTraces;
import io.opentelemetry.api.trace.Span;
import io.smallrye.mutiny.Uni;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.MediaType;
import java.time.Duration;
import org.eclipse.microprofile.openapi.annotations.security.SecurityRequirement;
import org.jboss.resteasy.reactive.RestPath;

/** Claimers take batches of recovery work and complete them. */
@SecurityRequirement(name = Credentials.INSTANCE_TOKEN)
@Path("/recovery")
@Consumes(MediaType.APPLICATION_JSON)
@Produces(MediaType.APPLICATION_JSON)
public class RecoveryResource {

  private final ClaimService claims;
  private final CompletionService completions;
  private final RollcallConfig config;
  private final RateLimiter limiter;
  private final RequestCaller caller;
  private final RecoveryTraces traces;
  private final PassTraces passTraces;

  RecoveryResource(
      ClaimService claims,
      CompletionService completions,
      RollcallConfig config,
      RateLimiter limiter,
      RequestCaller caller,
      RecoveryTraces traces,
      PassTraces passTraces) {
    this.traces = traces;
    this.passTraces = passTraces;
    this.caller = caller;
    this.claims = claims;
    this.completions = completions;
    this.config = config;
    this.limiter = limiter;
  }

  /**
   * Claims a batch, or learns to wait, or that recovery is done; with {@code waitMs}, the answer
   * waits for work (pushed, not polled).
   */
  @POST
  @Path("/claim")
  public Uni<ClaimResponse> claim(ClaimRequest request) {
    int maxRuns =
        Requests.range(
            request == null ? null : request.maxRuns(),
            config.batch().defaultSize(),
            1,
            config.batch().maxSize(),
            "maxRuns");
    int waitMs =
        Requests.range(
            request == null ? null : request.waitMs(),
            0,
            0,
            (int) config.claim().maxWait().toMillis(),
            "waitMs");
    boolean idle = request != null && Boolean.TRUE.equals(request.idle());
    Caller caller = this.caller.get();
    limiter.claim(caller.instanceId());
    // The claim's span; a batch handed out joins its pass's trace too, linked to this span.
    return traces
        .traced(
            RecoveryTraces.CLAIM,
            span ->
                claims
                    .claim(caller, maxRuns, Duration.ofMillis(waitMs), idle)
                    .chain(result -> passTraces.handedOut(caller.namespace(), result, span)),
            RecoveryResource::describe)
        .map(RecoveryResource::view);
  }

  private static void describe(Span span, ClaimResult result) {
    if (result instanceof ClaimResult.Batch b) {
      RecoveryTraces.claimedBatch(span, PassTraces.handOut(b.batch()));
    } else if (result instanceof ClaimResult.Done d) {
      RecoveryTraces.claimed(span, "done", d.epochId());
    } else {
      RecoveryTraces.claimed(span, "wait", null);
    }
  }

  /** Completes a batch under its fence. */
  @POST
  @Path("/batches/{id}/complete")
  public Uni<CompleteResponse> complete(@RestPath long id, CompleteRequest request) {
    CompleteRequest body = Requests.body(request, "fence");
    if (body.fence() == null || body.fence() < 1) {
      throw new InvalidRequest("'fence' is required: the fence of the batch's claim");
    }
    var failed = Requests.texts(body.failedRunIds(), "failedRunIds", config.batch().maxSize());
    Caller caller = this.caller.get();
    return traces
        .traced(
            RecoveryTraces.COMPLETE,
            span -> completions.complete(caller, id, body.fence(), failed),
            (span, c) ->
                RecoveryTraces.completed(
                    span,
                    c.batchId(),
                    body.fence(),
                    new RecoveryTraces.Completed(c.enqueued(), c.failed(), c.retried())))
        .map(
            c ->
                new CompleteResponse(
                    c.batchId(),
                    "completed",
                    c.enqueued(),
                    c.failed(),
                    c.retried(),
                    c.alreadyCompleted()));
  }

  private static ClaimResponse view(ClaimResult result) {
    if (result instanceof ClaimResult.Batch b) {
      LeasedBatch batch = b.batch();
      return new ClaimResponse(
          "batch",
          new BatchView(
              batch.id(),
              batch.epochId(),
              batch.epochKind(),
              batch.fence(),
              batch.leaseExpiresAt(),
              batch.runs().stream()
                  .map(
                      r ->
                          new RunView(
                              r.runId(),
                              r.workflowName(),
                              r.queueName(),
                              r.reason(),
                              r.deadInstanceId(),
                              r.messageId()))
                  .toList()),
          null,
          null);
    }
    if (result instanceof ClaimResult.Wait w) {
      return new ClaimResponse("wait", null, w.retryAfterMs(), null);
    }
    return new ClaimResponse("done", null, null, ((ClaimResult.Done) result).epochId());
  }
}
