import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.server.config.DynamicBrokerConfig;

/**
 * Kafka's own broker ConfigDef, read from the installed jars for kbroker's catalogue tests
 * (run as a single source file: java -cp <kafka libs>/* KafkaBrokerConfigDef.java dump|check).
 * "dump": every key as JSON (name, type, default, validator, importance, internal, dynamic mode).
 * "check": reads JSON [[key, value], ...] on stdin and answers, per pair, null when Kafka's type
 * parser and validator accept the value, else the ConfigException message.
 */
public class KafkaBrokerConfigDef {
    public static void main(String[] args) throws Exception {
        ConfigDef def = kafka.server.KafkaConfig$.MODULE$.configDef();
        ObjectMapper json = new ObjectMapper();
        List<Object> out = new ArrayList<>();
        if (args.length > 0 && args[0].equals("check")) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            List<List<String>> pairs = json.readValue(in, List.class);
            for (List<String> pair : pairs) {
                ConfigDef.ConfigKey key = def.configKeys().get(pair.get(0));
                try {
                    Object parsed = ConfigDef.parseType(key.name, pair.get(1), key.type);
                    if (key.validator != null) key.validator.ensureValid(key.name, parsed);
                    out.add(null);
                } catch (ConfigException e) {
                    out.add(e.getMessage());
                }
            }
        } else {
            Map<String, String> modes = DynamicBrokerConfig.dynamicConfigUpdateModes();
            for (ConfigDef.ConfigKey key : def.configKeys().values()) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("name", key.name);
                row.put("type", key.type.name());
                row.put("default", key.hasDefault() ? ConfigDef.convertToString(key.defaultValue, key.type) : null);
                row.put("has_default", key.hasDefault());
                row.put("validator", key.validator == null ? null : key.validator.toString());
                row.put("importance", key.importance.name());
                row.put("internal", key.internalConfig);
                row.put("dynamic", modes.get(key.name));
                row.put("synonyms", DynamicBrokerConfig.brokerConfigSynonyms(key.name, true));
                out.add(row);
            }
        }
        System.out.println(json.writeValueAsString(out));
    }
}
