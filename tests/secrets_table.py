"""Planted secrets: (what, a text an agent or a person might produce with it, the secret itself).

Every secret here is made up but has its real format. The unit test runs each through the
redactor; the capture tests push all of them through the hooks, the service and the database, and
look for them in every table, queue file and log.
"""

from __future__ import annotations

PEM_RSA = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi0ZkQ1hRiGZyQ5WlTRuYcmNrPX\n"
    "k7zZXbGZ1u0qlJ9y5Lz5Zm3qWmYyZp2Y3p0sYzP0Q0RsaRsaPlantedKeyBodyOne\n-----END RSA PRIVATE KEY-----"
)
PEM_OPENSSH = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBPlantedOpenSSHKeyMaterialTwo==\n-----END OPENSSH PRIVATE KEY-----"
)
PEM_EC = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIPlantedEcKeyMaterialThreeXyZ0123456789abcdefAoGCCqGSM49\n-----END EC PRIVATE KEY-----"
PEM_PKCS8 = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCPlantedPkcs8KeyMaterialFour==\n-----END PRIVATE KEY-----"
PEM_ENCRYPTED = (
    "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApPlantedEncryptedKeyFive==\n"
    "-----END ENCRYPTED PRIVATE KEY-----"
)
PEM_PGP = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQdGBGPlantedPgpKeyMaterialSixAbCdEf0123456789\n=Xq9f\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)
PEM_DSA_CUT = "-----BEGIN DSA PRIVATE KEY-----\nMIIBuwIBAAKBgQDPlantedDsaKeySevenWithNoEndLine0123456789"
PUTTY = (
    "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5\n"
    "Private-Lines: 1\nAAAAIPlantedPuttyPrivateEight\nPrivate-MAC: 4f8c2e9a0b1d3c5e"
)

# (what, text, secret)
SECRETS: list[tuple[str, str, str]] = [
    # --- private keys ---------------------------------------------------------------------------
    ("pem rsa", f"the old deploy key was\n{PEM_RSA}\nrotate it", "PlantedKeyBodyOne"),
    ("pem openssh", f"cat ~/.ssh/id_ed25519 printed {PEM_OPENSSH}", "PlantedOpenSSHKeyMaterialTwo"),
    ("pem ec", PEM_EC, "PlantedEcKeyMaterialThree"),
    ("pem pkcs8", f'{{"type": "service_account", "private_key": "{PEM_PKCS8}"}}', "PlantedPkcs8KeyMaterialFour"),
    ("pem encrypted", PEM_ENCRYPTED, "PlantedEncryptedKeyFive"),
    ("pem pgp block", PEM_PGP, "PlantedPgpKeyMaterialSix"),
    ("pem without its end", PEM_DSA_CUT, "PlantedDsaKeySevenWithNoEndLine"),
    ("putty key", PUTTY, "AAAAIPlantedPuttyPrivateEight"),
    (
        "pem json-escaped",
        '{"key": "-----BEGIN RSA PRIVATE KEY-----\\nMIIPlantedEscapedNine\\n-----END RSA PRIVATE KEY-----"}',
        "MIIPlantedEscapedNine",
    ),
    # --- vendor tokens ----------------------------------------------------------------------------
    ("anthropic", "export ANTHROPIC_KEY_V=sk-ant-api03-Pl4nt3dAnthr0picK3yAbCdEfGhIjKlMnOp", "Pl4nt3dAnthr0picK3y"),
    ("anthropic admin", "use sk-ant-admin01-Pl4ntedAdm1nKeyZyXwVuTsRqPoNm for the org", "Pl4ntedAdm1nKeyZyXw"),
    (
        "openai project",
        "client = OpenAI(api_key='sk-proj-Pl4ntedOpenAiPr0jectKey1234567890abcd')",
        "Pl4ntedOpenAiPr0ject",
    ),
    ("openai legacy", "OPENAI sk-Pl4ntedLegacyOpenAiKey0123456789ABCDEFGH works", "Pl4ntedLegacyOpenAiKey"),
    ("stripe live secret", "charge with sk_live_51PlantedStripeLiveKeyAbCd0123", "51PlantedStripeLiveKey"),
    (
        "stripe test secret",
        'stripe.api_key = "sk_test_4eC39HqLyjWDarjtT1zdp7dcPlanted"',
        "4eC39HqLyjWDarjtT1zdp7dcPlanted",
    ),
    ("stripe restricted", "rk_live_51PlantedRestrictedKeyXyz9876 for reporting", "51PlantedRestrictedKey"),
    ("stripe webhook", "whsec_PlantedWebhookSigningSecret0123456789 verifies events", "PlantedWebhookSigningSecret"),
    ("aws access key id", "aws configure set aws_access_key_id AKIAPLANTED0AWSKEY12", "AKIAPLANTED0AWSKEY12"),
    ("aws session key id", "temporary creds ASIAPLANTEDSESSION345 expire at noon", "ASIAPLANTEDSESSION345"),
    (
        "aws secret in env",
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiPLANTEDKEY99",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiPLANTEDKEY99",
    ),
    (
        "aws credentials file",
        "[default]\naws_secret_access_key = PlantedCredsFileSecret/abc+XYZ012345678",
        "PlantedCredsFileSecret/abc+XYZ012345678",
    ),
    (
        "github classic",
        "git clone https://github.com/acme/api with ghp_Pl4ntedGitHubPat0123456789abcdefABCD",
        "ghp_Pl4ntedGitHubPat",
    ),
    ("github oauth", "token gho_Pl4ntedGitHubOauth0123456789abcdefABCD was issued", "Pl4ntedGitHubOauth"),
    (
        "github fine-grained",
        "github_pat_11APLANTED0FineGrained_abcdefghijklmnopqrstuvwxyz012345",
        "11APLANTED0FineGrained",
    ),
    ("github app", "installation token ghs_Pl4ntedAppInstallT0ken0123456789abcd", "Pl4ntedAppInstallT0ken"),
    ("gitlab pat", "GITLAB=glpat-Pl4ntedGitLabPat012345 in CI", "Pl4ntedGitLabPat012345"),
    ("gitlab deploy token", "use gldt-Pl4ntedDeployT0ken6789abcdef to pull", "Pl4ntedDeployT0ken"),
    ("gitlab runner", "register with GR1348941Pl4ntedRunnerT0ken012345", "Pl4ntedRunnerT0ken"),
    ("slack bot", "SLACK xoxb-123456789012-1234567890123-Pl4ntedSlackBotT0ken", "Pl4ntedSlackBotT0ken"),
    ("slack user", "xoxp-Pl4nted-Slack-User-T0ken-0123456789 for the export", "Pl4nted-Slack-User-T0ken"),
    ("slack app", "app-level token xapp-1-A0PLANTED-1234567890-abcdefabcdef", "A0PLANTED-1234567890"),
    (
        "slack webhook",
        "POST https://hooks.slack.com/services/T00PLANT/B00PLANT/Pl4ntedWebh00kPath",
        "Pl4ntedWebh00kPath",
    ),
    (
        "discord webhook",
        "notify https://discord.com/api/webhooks/123456789/Pl4nted-Discord_Webhook-T0ken",
        "Pl4nted-Discord_Webhook-T0ken",
    ),
    ("google api key", "maps key AIzaSyPl4ntedGoogleApiKey0123456789abcde", "AIzaSyPl4ntedGoogleApiKey"),
    (
        "google api key in url",
        "curl 'https://maps.googleapis.com/maps/api/geocode/json?address=x&key=AIzaSyQl4ntedGoogleUrlKey0123456789abcd'",
        "AIzaSyQl4ntedGoogleUrlKey",
    ),
    (
        "google oauth secret",
        "client_secret GOCSPX-Pl4ntedGoogleClientSecret01 in the json",
        "Pl4ntedGoogleClientSecret",
    ),
    ("google access token", "Bearer-less ya29.a0Pl4ntedGoogleAccessT0ken0123456789", "a0Pl4ntedGoogleAccessT0ken"),
    ("hugging face", "HF hf_Pl4ntedHuggingFaceT0ken0123456789abcdefg", "Pl4ntedHuggingFaceT0ken"),
    ("npm token", "//registry.npmjs.org/:_authToken=npm_Pl4ntedNpmT0ken0123456789abcdefghijkl", "Pl4ntedNpmT0ken"),
    ("pypi token", "twine upload -p pypi-AgEIcHlwaS5vcmcPl4ntedPyPiT0ken0123456789", "Pl4ntedPyPiT0ken"),
    ("sendgrid", "SG.Pl4ntedSendGridId012.Pl4ntedSendGridSecret0123456789 sends mail", "Pl4ntedSendGridSecret"),
    ("twilio api key", "twilio SK0f1e2d3c4b5a69788796a5b4c3d2e1f0 rotated", "0f1e2d3c4b5a69788796"),
    ("mailgun", "mailgun key-Pl4ntedMailgunKey0123456789abcdef is live", "Pl4ntedMailgunKey"),
    ("digitalocean", "doctl auth init -t dop_v1_" + "ab12" * 16, "ab12ab12ab12ab12ab12ab12"),
    ("shopify", "X-Shopify-Access-Token shpat_" + "0a1b" * 8, "0a1b0a1b0a1b0a1b"),
    ("databricks", "databricks token dapi" + "f00d" * 8, "dapif00df00d"),
    ("telegram bot", "bot 123456789:AAPl4ntedTelegramBotT0ken0123456789ab answers", "Pl4ntedTelegramBotT0ken"),
    ("vault", "VAULT hvs.Pl4ntedVaultServiceT0ken0123456 unsealed it", "Pl4ntedVaultServiceT0ken"),
    ("atlassian", "jira ATATT3xFfGF0Pl4ntedAtlassianApiT0ken0123456789 works", "Pl4ntedAtlassianApiT0ken"),
    ("linear", "lin_api_Pl4ntedLinearApiKey0123456789abcdef for the sync", "Pl4ntedLinearApiKey"),
    ("notion", "notion ntn_Pl4ntedNotionIntegrationT0ken0123456789abcdefgh", "Pl4ntedNotionIntegrationT0ken"),
    ("figma", "figd_Pl4ntedFigmaPers0nalAccessT0ken012345 exported", "Pl4ntedFigmaPers0nal"),
    ("grafana", "grafana glsa_Pl4ntedGrafanaServiceAcc0untT0ke_0a1b2c3d", "Pl4ntedGrafanaServiceAcc0untT0ke"),
    ("square", "sq0atp-Pl4ntedSquareAccessT0ken012345 charges", "Pl4ntedSquareAccessT0ken"),
    ("doppler", "DOPPLER dp.pt.Pl4ntedDopplerT0ken0123456789abcdefgh", "Pl4ntedDopplerT0ken"),
    ("age", "age key AGE-SECRET-KEY-1PLANTEDAGESECRETKEY0123456789ABCDEFGHJKLMNPQRSTUVW", "PLANTEDAGESECRETKEY"),
    ("azure ad client secret", "the app's secret xYz8Q~Pl4ntedAzureAdSecret.0123456789abc", "Pl4ntedAzureAdSecret"),
    ("cabrain key", "CABRAIN_API_KEY is cbk_Pl4ntedCaBrainKey0123456789abcdefghijkl", "Pl4ntedCaBrainKey"),
    ("jwt", "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJQbGFudGVkIn0.Pl4ntedJwtSignature0123", "Pl4ntedJwtSignature"),
    # --- headers ----------------------------------------------------------------------------------
    (
        "bearer header",
        "curl -H 'Authorization: Bearer opaque-Pl4nted-bearer-0123' https://api",
        "opaque-Pl4nted-bearer",
    ),
    ("basic header", "Authorization: Basic dXNlcjpQbDRudGVkQmFzaWNQYXNz", "dXNlcjpQbDRudGVkQmFzaWNQYXNz"),
    ("token header", '-H "Authorization: token Pl4ntedTokenHeaderValue99"', "Pl4ntedTokenHeaderValue99"),
    ("json authorization", '{"headers": {"authorization": "Bearer Pl4ntedJsonBearer77"}}', "Pl4ntedJsonBearer77"),
    ("proxy authorization", "Proxy-Authorization: Basic UGw0bnRlZFByb3h5", "UGw0bnRlZFByb3h5"),
    ("x-api-key header", "curl -H 'X-API-Key: Pl4ntedXApiKeyValue' https://svc", "Pl4ntedXApiKeyValue"),
    ("api-key header", "api-key: Pl4ntedAzureOpenAiKey0011", "Pl4ntedAzureOpenAiKey0011"),
    ("cookie header", "Cookie: sessionid=Pl4ntedSessionCookie123; csrftoken=abc", "Pl4ntedSessionCookie123"),
    ("set-cookie", "Set-Cookie: auth=Pl4ntedSetCookieAuth; HttpOnly", "Pl4ntedSetCookieAuth"),
    # --- command lines ---------------------------------------------------------------------------
    ("mysql -p attached", "mysql -u root -pPl4ntedMysqlPass prod < dump.sql", "Pl4ntedMysqlPass"),
    ("mysqldump -p attached", "mysqldump -h db -u admin -p'Pl4nted Quoted Pass' app > app.sql", "Pl4nted Quoted Pass"),
    ("mariadb -p", "mariadb --user=app -pPl4ntedMariaPass app", "Pl4ntedMariaPass"),
    ("mysql --password=", "mysql --password=Pl4ntedLongFlagPass -e 'select 1'", "Pl4ntedLongFlagPass"),
    ("curl -u", "curl -u deploy:Pl4ntedCurlPass https://ci.internal/job", "Pl4ntedCurlPass"),
    ("curl --user", "curl --user admin:Pl4ntedCurlUserPass -X POST https://x", "Pl4ntedCurlUserPass"),
    ("curl -u attached", "curl -uadmin:Pl4ntedAttachedPass https://x", "Pl4ntedAttachedPass"),
    ("curl --proxy-user", "curl --proxy-user bob:Pl4ntedProxyPass https://x", "Pl4ntedProxyPass"),
    ("wget password", "wget --user=bob --password=Pl4ntedWgetPass https://x/file", "Pl4ntedWgetPass"),
    ("wget http-password", "wget --http-password Pl4ntedHttpPass https://x", "Pl4ntedHttpPass"),
    ("sshpass", "sshpass -p 'Pl4ntedSshPass' ssh deploy@host uptime", "Pl4ntedSshPass"),
    ("redis-cli -a", "redis-cli -h cache -a Pl4ntedRedisPass ping", "Pl4ntedRedisPass"),
    ("docker login -p", "docker login -u ci -p Pl4ntedRegistryPass registry.io", "Pl4ntedRegistryPass"),
    ("helm registry login", "helm registry login ghcr.io -u bot -p Pl4ntedHelmPass", "Pl4ntedHelmPass"),
    ("az login", "az login --service-principal -u app-id -p Pl4ntedAzSpSecret --tenant t", "Pl4ntedAzSpSecret"),
    ("mongosh -p", "mongosh -u admin -p Pl4ntedMongoPass --authenticationDatabase admin", "Pl4ntedMongoPass"),
    ("ldapsearch -w", "ldapsearch -x -D cn=admin -w Pl4ntedLdapPass -b dc=acme", "Pl4ntedLdapPass"),
    ("smbclient", "smbclient //fs/share -U alice%Pl4ntedSmbPass", "Pl4ntedSmbPass"),
    ("openssl passin", "openssl rsa -in k.pem -passin pass:Pl4ntedOpensslPass -out k2.pem", "Pl4ntedOpensslPass"),
    ("keytool storepass", "keytool -list -keystore ks.jks -storepass Pl4ntedStorePass", "Pl4ntedStorePass"),
    ("--token flag", "vercel deploy --token Pl4ntedVercelToken", "Pl4ntedVercelToken"),
    ("--api-key flag", "tool --api-key=Pl4ntedApiKeyFlag run", "Pl4ntedApiKeyFlag"),
    ("--client-secret flag", 'oauth2 --client-secret "Pl4nted Client Secret" --id x', "Pl4nted Client Secret"),
    ("--passphrase flag", "gpg --batch --passphrase Pl4ntedGpgPassphrase -d f.gpg", "Pl4ntedGpgPassphrase"),
    ("PGPASSWORD env", "PGPASSWORD=Pl4ntedPgPass psql -h db -U app", "Pl4ntedPgPass"),
    ("MYSQL_PWD env", "MYSQL_PWD='Pl4ntedMysqlPwd' mysql -u app", "Pl4ntedMysqlPwd"),
    # --- assignments ------------------------------------------------------------------------------
    (".env password", "DB_PASSWORD=Pl4ntedDotenvPass", "Pl4ntedDotenvPass"),
    (".env secret quoted", 'JWT_SECRET="Pl4nted dotenv secret"', "Pl4nted dotenv secret"),
    (".env token exported", "export GITHUB_TOKEN=Pl4ntedExportedToken42", "Pl4ntedExportedToken42"),
    (".env api key", "STRIPE_API_KEY=Pl4ntedStripeEnvKey", "Pl4ntedStripeEnvKey"),
    (".env client secret", "OAUTH_CLIENT_SECRET=Pl4ntedOauthClientSecret", "Pl4ntedOauthClientSecret"),
    (".env private key", "SIGNING_PRIVATE_KEY=Pl4ntedSigningPrivateKey", "Pl4ntedSigningPrivateKey"),
    (".env passwd", "LDAP_PASSWD=Pl4ntedLdapPasswd", "Pl4ntedLdapPasswd"),
    (
        "yaml password",
        "database:\n  user: app\n  password: Pl4nted yaml pass phrase\n  host: db",
        "Pl4nted yaml pass phrase",
    ),
    ("yaml token", "slack_token: 'Pl4ntedYamlToken'", "Pl4ntedYamlToken"),
    ("json password", '{"user": "app", "password": "Pl4ntedJsonPass", "port": 5432}', "Pl4ntedJsonPass"),
    ("json api key", '{"apiKey": "Pl4ntedJsonApiKey"}', "Pl4ntedJsonApiKey"),
    ("toml secret", 'secret_key = "Pl4ntedTomlSecret"', "Pl4ntedTomlSecret"),
    ("ini password", "[db]\npassword = Pl4ntedIniPass", "Pl4ntedIniPass"),
    ("python kwarg", "connect(host='db', password='Pl4ntedKwargPass')", "Pl4ntedKwargPass"),
    ("ruby hash", "config = { api_key => 'Pl4ntedRubyKey' }", "Pl4ntedRubyKey"),
    ("go assignment", 'token := "Pl4ntedGoToken"', "Pl4ntedGoToken"),
    ("credentials", "credentials: Pl4ntedCredentialsValue", "Pl4ntedCredentialsValue"),
    ("connection string", "CONNECTION_STRING=Server=db;User Id=sa;Password=Pl4ntedConnPass;", "Pl4ntedConnPass"),
    ("prose password", "The wifi password is Pl4nted-Wifi-99 for guests.", "Pl4nted-Wifi-99"),
    # --- azure connection strings ---------------------------------------------------------------------
    (
        "azure storage",
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Pl4ntedAzureAccountKey+abc/==;EndpointSuffix=core.windows.net",
        "Pl4ntedAzureAccountKey",
    ),
    (
        "azure service bus",
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=Pl4ntedSbKey0123=",
        "Pl4ntedSbKey0123",
    ),
    (
        "azure sas",
        "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2022&sig=Pl4ntedSasSig%3D",
        "Pl4ntedSasSig",
    ),
    (
        "azure sql",
        "Server=tcp:acme.database.windows.net,1433;User ID=app;Pwd=Pl4ntedAzureSqlPwd;Encrypt=True",
        "Pl4ntedAzureSqlPwd",
    ),
    # --- URLs ------------------------------------------------------------------------------------
    ("postgres url", "psql postgresql://app:Pl4ntedPgUrlPass@db.internal:5432/app", "Pl4ntedPgUrlPass"),
    ("redis url no user", "REDIS_URL=redis://:Pl4ntedRedisUrlPass@cache:6379/0", "Pl4ntedRedisUrlPass"),
    (
        "https basic auth",
        "git remote add origin https://bot:Pl4ntedHttpsPass@git.internal/acme/api.git",
        "Pl4ntedHttpsPass",
    ),
    ("amqp url", "amqp://guest:Pl4ntedAmqpPass@mq:5672/", "Pl4ntedAmqpPass"),
    ("mongodb+srv url", "mongodb+srv://admin:Pl4ntedMongoUrl@cluster0.x.mongodb.net/db", "Pl4ntedMongoUrl"),
    (
        "token as url user",
        "git clone https://Pl4ntedOauthTokenAsUser0123456789@github.com/acme/private.git",
        "Pl4ntedOauthTokenAsUser",
    ),
    (
        "access_token query",
        "GET https://api.example.com/v1/me?access_token=Pl4ntedQueryToken&fields=id",
        "Pl4ntedQueryToken",
    ),
    ("api_key query", "https://api.example.com/data?api_key=Pl4ntedQueryApiKey", "Pl4ntedQueryApiKey"),
    (
        "s3 presigned",
        "https://b.s3.amazonaws.com/f?X-Amz-Credential=AKIAEXAMPLE%2F20260101&X-Amz-Signature=Pl4ntedAmzSig",
        "Pl4ntedAmzSig",
    ),
    (
        "client_secret query",
        "POST /token?grant_type=client_credentials&client_secret=Pl4ntedQuerySecret",
        "Pl4ntedQuerySecret",
    ),
    # --- private blocks --------------------------------------------------------------------------------
    ("private block", "my address is <private>12 Pl4nted Street</private> ok", "12 Pl4nted Street"),
    ("private unclosed", "notes <private>Pl4ntedUnclosedPrivate and the rest", "Pl4ntedUnclosedPrivate"),
    (
        "private nested",
        "a <private>x <private>y</private> Pl4ntedAfterNestedClose</private> b",
        "Pl4ntedAfterNestedClose",
    ),
    ("private upper case", "<PRIVATE>Pl4ntedUpperPrivate</PRIVATE>", "Pl4ntedUpperPrivate"),
    ("private attributes", '<private reason="pii">Pl4ntedAttrPrivate</private>', "Pl4ntedAttrPrivate"),
    ("private spaced tags", "< private >Pl4ntedSpacedPrivate</ private >", "Pl4ntedSpacedPrivate"),
    ("private stray close", "Pl4ntedBeforeStrayClose</private> and after", "Pl4ntedBeforeStrayClose"),
    (
        "private multi-line",
        "start\n<private>\nline Pl4ntedMultiLinePrivate\n</private>\nend",
        "Pl4ntedMultiLinePrivate",
    ),
    ("private two blocks", "<private>one</private> public <private>Pl4ntedSecondBlock</private>", "Pl4ntedSecondBlock"),
]
