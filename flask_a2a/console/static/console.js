// The A2A console: tabs, who the caller is, and the screens (card.js, send.js, watch.js,
// tasks.js, operators.js). Served by the app itself; talks only to the app's own origin.

import { $, show } from "./dom.js";
import { paths, setToken, hasToken, consoleGet } from "./rpc.js";
import { loadCard, renderCard } from "./card.js";
import { initSend, setSkills, chooseSkill } from "./send.js";
import { initWatch, setNotice, watchTaskById, runStream, startFresh } from "./watch.js";
import { initTasks, listTasks } from "./tasks.js";
import { initOperators, loadOperators } from "./operators.js";

const tabs = [...document.querySelectorAll("[data-tab]")];
let signedIn = false;
// Each whoAmI() call is numbered: only the newest one's answer is shown, so the page's first
// anonymous question answering late cannot overwrite the sign-in a pasted token just made.
let asked = 0;

function notice(text) {
  const box = $("#notice");
  box.textContent = text || "";
  show(box, Boolean(text));
}

function select(name, focus = false) {
  for (const tab of tabs) {
    const active = tab.dataset.tab === name;
    tab.setAttribute("aria-current", active ? "page" : "false");
    show(document.getElementById(`screen-${tab.dataset.tab}`), active);
  }
  if (name === "operators") loadOperators();
  if (name === "tasks" && signedIn && !document.querySelector("#tasks-table tbody tr")) listTasks();
  if (focus) document.getElementById(`screen-${name}`).querySelector("h2").focus();
}

async function whoAmI() {
  const mine = ++asked;
  try {
    const session = await consoleGet("session");
    if (mine !== asked) return null;
    signedIn = true;
    const scopes = session.scopes ? `, scopes ${session.scopes.join(" ")}` : "";
    $("#who").textContent = `Signed in as ${session.name || session.owner}${session.tenant ? ` (tenant ${session.tenant})` : ""}${scopes}${hasToken() ? " with a bearer token" : ""}.`;
    show($("#token-clear"), hasToken());
    show(document.querySelector('[data-tab="operators"]'), session.admin);
    setSkills(session.skills, session.tools);
    $("#who").title = session.name ? `owner ${session.owner}` : "";
    notice("");
    return null;
  } catch (error) {
    if (mine !== asked) return null;
    signedIn = false;
    $("#who").textContent = error.status === 401
      ? "Not signed in: paste a bearer token, or sign in to the app."
      : `Cannot tell who you are: ${error.message}`;
    show($("#token-clear"), hasToken());
    show(document.querySelector('[data-tab="operators"]'), false);
    setSkills([], {});
    return error;
  }
}

function init() {
  for (const tab of tabs) {
    tab.addEventListener("click", () => select(tab.dataset.tab, true));
  }
  for (const screen of document.querySelectorAll(".screen h2")) screen.setAttribute("tabindex", "-1");
  setNotice(notice);
  initWatch();
  initSend(() => select("watch"));
  initTasks(
    (id) => { select("watch"); watchTaskById(id); },
    (id) => { select("watch"); startFresh("stream", null); runStream("SubscribeToTask", { id }); },
  );
  initOperators();
  $("#auth").addEventListener("submit", async (event) => {
    event.preventDefault();
    setToken($("#token").value);
    $("#token").value = "";
    const refused = await whoAmI();
    if (refused) {
      notice(refused.status === 401
        ? "Your app's principal hook resolved no owner from this token."
        : `The app refused this token: ${refused.message}`);
    }
  });
  $("#token-clear").addEventListener("click", () => {
    setToken("");
    whoAmI();
  });
  select("card");
  loadCard().then((card) => {
    $("#agent-name").textContent = card.name;
    $("#agent-sub").textContent = `A2A console · ${paths.a2a}`;
    renderCard(card, (id, example) => {
      if (!signedIn) {
        notice("Sign in or paste a bearer token first.");
        return;
      }
      chooseSkill(id, example);
      select("send", true);
    });
  }, (error) => notice(`Cannot load the agent card: ${error.message}`));
  whoAmI();
}

init();
