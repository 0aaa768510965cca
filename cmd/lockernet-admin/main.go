// Command lockernet-admin is the operator's tool: migrations, signing-key rotation, API
// clients, and (as the service grows) lockers' service state and gateway keys. It reads the
// same environment as the services (DATABASE_URL, LOCKERNET_MASTER_KEY[_FILE],
// TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE).
//
//	lockernet-admin migrate [-temporal]          apply migrations (and register Temporal search attributes)
//	lockernet-admin rotate-signing-key [-revoke] new JWT signing key; old ones stay published until their tokens expire (-revoke: they stop verifying at once)
//	lockernet-admin create-client -org NAME -name LABEL [-scopes service_provider,tower_access]
//	lockernet-admin seed-demo [-api-url U] [-towersim-config F]  write the demo data (towers named with
//	                                             LOCKERNET_TOWER_ID_PREFIX) and $LOCKERNET_DATA_DIR/demo-credentials.json;
//	                                             -towersim-config also provisions the tower simulator
//	lockernet-admin create-gateway-key -org NAME [-rate-limit N]      gateway cloud API key, shown once
//	lockernet-admin revoke-gateway-key -id ID | -prefix lnk_1a2b3c4d
//	lockernet-admin register-gateway -serial S -location-id N -url U -secret-file F
//	lockernet-admin locker out-of-service -tower T -locker L -reason R [-force]
//	lockernet-admin locker in-service -tower T -locker L
//	lockernet-admin client sdk-claims -client ID (-claims c1,c2 | -default)
//	lockernet-admin client disable|enable -client ID
//	lockernet-admin tower events-resets [-tower T] [-limit N]
//	lockernet-admin backup -out DIR [-temporal-sqlite F | -temporal-db URL,URL | -no-temporal]
//	lockernet-admin restore -from DIR [-temporal-sqlite F | -temporal-db URL,URL] [-force]
//	lockernet-admin reconcile                    re-arm the workflows of the active rows (restore does it)
//	lockernet-admin histories export -out DIR [-since 24h] [-per-type N] [-running=false]
//	                                             write the histories of recent and running workflows
//	lockernet-admin histories replay -dir DIR    replay such a folder against this build's workflows
//	lockernet-admin deployment status            the worker deployment's builds: current, ramping, draining
//	lockernet-admin deployment set-current -build ID [-wait 2m] | ramp -build ID -percent N | rollback
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/lockernet/lockernet/internal/config"
	"github.com/lockernet/lockernet/internal/credential"
	"github.com/lockernet/lockernet/internal/jwtauth"
	"github.com/lockernet/lockernet/internal/keyring"
	"github.com/lockernet/lockernet/internal/seed"
	"github.com/lockernet/lockernet/internal/store"
	"github.com/lockernet/lockernet/internal/temporalclient"
)

type command struct {
	summary string
	run     func(ctx context.Context, env *adminEnv, args []string) error
}

var commands = map[string]command{
	"migrate":            {"apply database migrations; -temporal also registers the search attributes", migrate},
	"rotate-signing-key": {"[-revoke]: add a new JWT signing key and retire the others (-revoke: revoke them, for a leaked key)", rotateSigningKey},
	"create-client":      {"create a service-provider OAuth client and print its secret once", createClient},
	"seed-demo":          {"[-api-url U] [-towersim-config F]: write the idempotent demo data and demo-credentials.json", seedDemo},
	"locker":             {"out-of-service|in-service -tower T -locker L [-reason R] [-force]: change a tower locker's service state", locker},
	"create-gateway-key": {"-org NAME|ID [-rate-limit N] [-label L]: issue a gateway cloud API key and print it once", createGatewayKey},
	"revoke-gateway-key": {"-id UUID | -prefix lnk_...: revoke a gateway cloud API key (refused from its next request on)", revokeGatewayKey},
	"list-gateway-keys":  {"[-org NAME|ID]: list gateway cloud API keys (never the keys themselves)", listGatewayKeys},
	"create-app-key":     {"-org NAME|ID [-sub-organization ID]: issue an app engine API key (org-wide: an admin key) and print it once", createAppKey},
	"register-gateway":   {"-serial S -location-id N -url U -secret-file F [-check]: register a gateway with its sealed secret", registerGateway},
	"client":             {"sdk-claims -client ID (-claims c1,c2 | -default): the tower-session claims a client's apps may use; disable|enable -client ID: cut a client off (its tokens and app keys too) or restore it", clientCmd},
	"tower":              {"events-resets [-tower T] [-limit N]: reports that a tower's event log was reset, newest first", towerCmd},
	"backup":             {"-out DIR [-temporal-sqlite F | -temporal-db URL,URL | -no-temporal]: back up Temporal's persistence, then the application's database (pg_dump)", backupCmd},
	"restore":            {"-from DIR [-temporal-sqlite F | -temporal-db URL,URL] [-force]: restore a backup into the stopped system and re-arm the active rows' workflows", restoreCmd},
	"reconcile":          {"re-arm the workflows of every active reservation, token and access code and pending webhook delivery (after restoring the database alone)", reconcile},
	"histories":          {"export -out DIR [-since 24h] [-per-type N] [-running=false]: write the histories of recent and running workflows; replay -dir DIR: replay such a folder against this build's workflows", historiesCmd},
	"deployment":         {"status | set-current -build ID [-wait D] | ramp -build ID -percent N | rollback: see and change which build of the worker deployment runs new workflows (decision 0019)", deploymentCmd},
	"webhook":            {"listen -addr HOST:PORT (-secret whsec_... | -secret-file F): a receiver that verifies each delivery's signature and prints its event", webhookCmd},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockernet-admin:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		usage(out)
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(os.Stderr)
		return fmt.Errorf("unknown command %q", args[0])
	}
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	env := &adminEnv{cfg: cfg, out: out, logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	defer env.close()
	return cmd.run(ctx, env, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: lockernet-admin <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	slicesSort(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-20s %s\n", n, commands[n].summary)
	}
}

type adminEnv struct {
	cfg    config.Config
	out    io.Writer
	logger *slog.Logger
	st     *store.Store
}

func (e *adminEnv) store(ctx context.Context) (*store.Store, error) {
	if e.st == nil {
		st, err := store.Open(ctx, e.cfg.DatabaseURL, store.Options{MaxConns: 2, AppName: "lockernet-admin"})
		if err != nil {
			return nil, err
		}
		e.st = st
	}
	return e.st, nil
}

func (e *adminEnv) keyring() (*keyring.Keyring, error) {
	return keyring.Load(e.cfg.MasterKey, e.cfg.MasterKeyFile)
}

// storeAndKeyring loads the master keyring and opens the database, for the commands that
// seal or open secrets.
func (e *adminEnv) storeAndKeyring(ctx context.Context) (*store.Store, *keyring.Keyring, error) {
	ring, err := e.keyring()
	if err != nil {
		return nil, nil, err
	}
	st, err := e.store(ctx)
	if err != nil {
		return nil, nil, err
	}
	return st, ring, nil
}

func (e *adminEnv) close() {
	if e.st != nil {
		e.st.Close()
	}
}

func migrate(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	withTemporal := fs.Bool("temporal", false, "also register the workflows' search attributes on TEMPORAL_NAMESPACE")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	if err := st.Migrate(ctx, env.logger); err != nil {
		return err
	}
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.out, "database schema at version %d\n", v)
	if *withTemporal {
		tc, err := temporalclient.Dial(ctx, env.cfg.TemporalAddress, env.cfg.TemporalNS, env.logger)
		if err != nil {
			return err
		}
		defer tc.Close()
		if err := temporalclient.EnsureSearchAttributes(ctx, tc, env.cfg.TemporalNS); err != nil {
			return err
		}
		fmt.Fprintf(env.out, "search attributes registered on namespace %s\n", env.cfg.TemporalNS)
	}
	return nil
}

func rotateSigningKey(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("rotate-signing-key", flag.ContinueOnError)
	revoke := fs.Bool("revoke", false, "revoke the other keys: every token they signed stops verifying within seconds (for a leaked key)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, ring, err := env.storeAndKeyring(ctx)
	if err != nil {
		return err
	}
	auth := jwtauth.New(st, ring, env.cfg.PublicURL)
	if *revoke {
		kid, err := auth.RotateRevoking(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.out, "new signing key %s; the others are revoked: their tokens stop verifying on every apiserver within 2 s and clients must get new ones\n", kid)
		return nil
	}
	kid, err := auth.Rotate(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.out, "new signing key %s; the others stay in the JWKS until their tokens have expired\n", kid)
	return nil
}

func createClient(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("create-client", flag.ContinueOnError)
	org := fs.String("org", "", "organization name (created if missing)")
	name := fs.String("name", "", "a label for the client")
	id := fs.String("id", "", "client id (default: derived from the label)")
	scopes := fs.String("scopes", jwtauth.ScopeServiceProvider+","+jwtauth.ScopeTowerAccess, "comma-separated scopes")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *org == "" || *name == "" {
		return errors.New("create-client needs -org and -name")
	}
	var list []string
	for _, s := range strings.Split(*scopes, ",") {
		switch s = strings.TrimSpace(s); s {
		case jwtauth.ScopeServiceProvider, jwtauth.ScopeTowerAccess:
			list = append(list, s)
		case "":
		default:
			return fmt.Errorf("unknown scope %q", s)
		}
	}
	clientID := *id
	if clientID == "" {
		clientID = strings.ToLower(strings.Join(strings.Fields(*name), "-")) + "-" + credential.NewSecret()[:6]
	}
	st, err := env.store(ctx)
	if err != nil {
		return err
	}
	o, err := st.EnsureOrganization(ctx, *org)
	if err != nil {
		return err
	}
	secret := credential.NewSecret()
	if err := st.CreateClient(ctx, store.Client{ClientID: clientID, OrganizationID: o.ID, Name: *name,
		SecretHash: credential.Hash(secret), Scopes: list}); err != nil {
		return err
	}
	return json.NewEncoder(env.out).Encode(map[string]any{"client_id": clientID, "client_secret": secret,
		"organization_id": o.ID, "scopes": list, "note": "the secret is shown once"})
}

func seedDemo(ctx context.Context, env *adminEnv, args []string) error {
	fs := flag.NewFlagSet("seed-demo", flag.ContinueOnError)
	apiURL := fs.String("api-url", "", "base URL of the API, recorded in the credentials and the tower simulator's file "+
		"(default: the credentials file's, else LOCKERNET_PUBLIC_URL)")
	towerSim := fs.String("towersim-config", "", "also write the tower simulator's provisioning file (the towers' secrets) here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	st, ring, err := env.storeAndKeyring(ctx)
	if err != nil {
		return err
	}
	path := filepath.Join(env.cfg.DataDir, seed.CredentialsFile)
	prev, err := seed.ReadCredentials(path)
	if err != nil {
		return err
	}
	res, err := seed.DemoWith(ctx, st, ring, prev, seed.DemoOptions{TowerIDPrefix: env.cfg.TowerIDPrefix})
	if err != nil {
		return err
	}
	if prev != nil {
		res.Credentials.Gateways, res.Credentials.TowerSimURL = prev.Gateways, prev.TowerSimURL
	}
	switch {
	case *apiURL != "":
	case prev != nil && prev.APIURL != "":
		*apiURL = prev.APIURL
	default:
		*apiURL = env.cfg.PublicURL
	}
	res.Credentials.APIURL = *apiURL
	// Name the demo gateways' locations, so a script can register the gateways it runs
	// (register-gateway -location-id) without guessing ids.
	for _, serial := range slices.Sorted(maps.Keys(res.GatewayLocationID)) {
		if !slices.ContainsFunc(res.Credentials.Gateways, func(g seed.GatewayRef) bool { return g.Serial == serial }) {
			res.Credentials.Gateways = append(res.Credentials.Gateways, seed.GatewayRef{Serial: serial, LocationID: res.GatewayLocationID[serial]})
		}
	}
	if err := seed.WriteCredentials(path, res.Credentials); err != nil {
		return err
	}
	fmt.Fprintf(env.out, "demo data written; credentials in %s\n", path)
	if *towerSim != "" {
		if err := seed.WriteTowerSimConfig(*towerSim, *apiURL, filepath.Join(filepath.Dir(*towerSim), "towersim"), res.Credentials, res.Towers); err != nil {
			return err
		}
		fmt.Fprintf(env.out, "tower simulator provisioning file written to %s\n", *towerSim)
	}
	return nil
}
