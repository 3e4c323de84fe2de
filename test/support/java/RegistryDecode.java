import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors;
import com.google.protobuf.DynamicMessage;
import com.google.protobuf.Struct;
import com.google.protobuf.util.JsonFormat;
import io.apicurio.registry.utils.protobuf.schema.FileDescriptorUtils;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * An independent deserializer for the Schema Registry test, in Java: reads Kafka values in the
 * Confluent wire format (magic byte 0, big-endian schema id, zigzag-varint message indexes),
 * fetches each schema by id from the registry's Confluent-compatible API, parses the .proto text
 * with Apicurio's own parser (FileDescriptorUtils, what the registry itself uses) and decodes the
 * message with protobuf-java's DynamicMessage. Nothing of the relay's code or generated classes.
 *
 * java -cp '<apicurio app>/lib/main/*' RegistryDecode.java <ccompat url> <value file>...
 * prints, per file: <schema id> TAB <message type> TAB <message as protobuf JSON>
 */
public class RegistryDecode {
  static int zigzag(ByteBuffer b) {
    int v = 0;
    for (int shift = 0; ; shift += 7) {
      int x = b.get() & 0xff;
      v |= (x & 0x7f) << shift;
      if (x < 0x80) break;
    }
    return (v >>> 1) ^ -(v & 1);
  }

  public static void main(String[] args) throws Exception {
    HttpClient http = HttpClient.newHttpClient();
    for (int f = 1; f < args.length; f++) {
      ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(Path.of(args[f])));
      if (b.get() != 0) throw new IllegalStateException(args[f] + ": no magic byte 0");
      int id = b.getInt();
      List<Integer> indexes = new ArrayList<>();
      int count = zigzag(b);
      if (count == 0) indexes.add(0);
      for (int i = 0; i < count; i++) indexes.add(zigzag(b));
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(URI.create(args[0] + "/schemas/ids/" + id)).build(),
              HttpResponse.BodyHandlers.ofString());
      if (r.statusCode() != 200) throw new IllegalStateException("schema " + id + ": " + r.statusCode() + " " + r.body());
      Struct.Builder json = Struct.newBuilder();
      JsonFormat.parser().ignoringUnknownFields().merge(r.body(), json);
      String schema = json.getFieldsOrThrow("schema").getStringValue();
      Descriptors.FileDescriptor file =
          FileDescriptorUtils.protoFileToFileDescriptor(schema, "fetched.proto", Optional.empty());
      Descriptors.Descriptor type = file.getMessageTypes().get(indexes.get(0));
      for (int i = 1; i < indexes.size(); i++) type = type.getNestedTypes().get(indexes.get(i));
      DynamicMessage message = DynamicMessage.parseFrom(type, ByteString.copyFrom(b));
      System.out.println(
          id + "\t" + type.getFullName() + "\t" + JsonFormat.printer().omittingInsignificantWhitespace().print(message));
    }
  }
}
