package dev.rollcall.api;

import dev.rollcall.error.ProblemType;
import java.util.List;
import java.util.Map;
import org.eclipse.microprofile.openapi.OASFactory;
import org.eclipse.microprofile.openapi.OASFilter;
import org.eclipse.microprofile.openapi.models.OpenAPI;
import org.eclipse.microprofile.openapi.models.Operation;
import org.eclipse.microprofile.openapi.models.media.Schema;
import org.eclipse.microprofile.openapi.models.responses.APIResponses;

/**
 * Adds to the OpenAPI description what annotations do not: the bearer schemes ({@link
 * Credentials#describe}), and the problem document: a {@code Problem} schema whose {@code type}
 * lists every stable problem type, and 4XX/5XX responses of {@code application/problem+json} on
 * every operation.
 */
public class ProblemDocs implements OASFilter {

  @Override
  public void filterOpenAPI(OpenAPI openAPI) {
    if (openAPI.getComponents() == null) {
      openAPI.setComponents(OASFactory.createComponents());
    }
    Credentials.describe(openAPI.getComponents());
    Schema type = OASFactory.createSchema().addType(Schema.SchemaType.STRING);
    for (ProblemType t : ProblemType.values()) {
      type.addEnumeration(Problem.TYPE_PREFIX + t.slug());
    }
    openAPI
        .getComponents()
        .addSchema(
            "Problem",
            OASFactory.createSchema()
                .addType(Schema.SchemaType.OBJECT)
                .description(
                    "RFC 9457 problem document. Switch on 'type'; extension members carry the ids"
                        + " involved (instanceId, batchId, fence, currentFence, retryAfterMs…).")
                .properties(
                    Map.of(
                        "type", type,
                        "title", OASFactory.createSchema().addType(Schema.SchemaType.STRING),
                        "status", OASFactory.createSchema().addType(Schema.SchemaType.INTEGER),
                        "detail", OASFactory.createSchema().addType(Schema.SchemaType.STRING)))
                .required(List.of("type", "title", "status")));
    if (openAPI.getPaths() == null || openAPI.getPaths().getPathItems() == null) {
      return;
    }
    openAPI
        .getPaths()
        .getPathItems()
        .values()
        .forEach(item -> item.getOperations().values().forEach(ProblemDocs::addProblems));
  }

  private static void addProblems(Operation operation) {
    APIResponses responses = operation.getResponses();
    if (responses == null) {
      responses = OASFactory.createAPIResponses();
      operation.setResponses(responses);
    }
    for (String range : List.of("4XX", "5XX")) {
      if (!responses.hasAPIResponse(range)) {
        responses.addAPIResponse(
            range,
            OASFactory.createAPIResponse()
                .description("A problem document")
                .content(
                    OASFactory.createContent()
                        .addMediaType(
                            Problem.MEDIA_TYPE,
                            OASFactory.createMediaType()
                                .schema(
                                    OASFactory.createSchema()
                                        .ref("#/components/schemas/Problem")))));
      }
    }
  }
}
