package guard

import "strings"

// The word lists the entity rules read. They are short on purpose: the
// model judges what they leave open. Written here; none is taken from a
// data set.

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// particles join the capitalised words of a name or an organisation:
// Seán Ó Súilleabháin, Aoife Ní Bhriain, Bank of Ireland, Marks & Spencer.
var particles = set("Ó Ní Nic Mac Mc Uí Ua Bean de De del della di da van Van von Von le La la du dos " +
	"of and & for the")

// nameParticles may open or close a run (Ó Súilleabháin); the others only
// join (of, and, the).
var nameParticles = set("Ó Ní Nic Mac Mc Uí Ua de De van Van von Von La")

// openers start sentences or greet: not part of a run. A non-empty value
// is the cue they give to what follows.
var openers = map[string]string{
	"Dear": cuePerson, "Hi": cuePerson, "Hello": cuePerson, "Hey": cuePerson, "Thanks": cuePerson,
	"Mr": cuePerson, "Mrs": cuePerson, "Ms": cuePerson, "Miss": cuePerson, "Dr": cuePerson,
	"Prof": cuePerson, "Fr": cuePerson, "Sr": cuePerson, "Sir": cuePerson, "Madam": cuePerson,
	"Signed": cuePerson, "Regards": cuePerson,
	"The": "", "A": "", "An": "", "This": "", "That": "", "These": "", "Those": "", "In": cuePlace,
	"On": "", "At": "", "For": "", "From": cuePlace, "To": "", "If": "", "When": "", "Then": "",
	"And": "", "But": "", "Or": "", "So": "", "As": "", "By": "", "With": "", "We": "", "I": "",
	"You": "", "He": "", "She": "", "It": "", "They": "", "Our": "", "Your": "", "My": "",
	"His": "", "Her": "", "Their": "", "Please": "", "Note": "", "See": "", "Also": "", "All": "",
	"Each": "", "Every": "", "No": "", "Not": "", "Yes": "", "Thank": "", "Kind": "", "Best": "",
	"Is": "", "Are": "", "Was": "", "Were": "", "Do": "", "Does": "", "Did": "", "Can": "",
	"Could": "", "Should": "", "Would": "", "Will": "", "May": "", "Might": "", "Must": "",
	"Call": "", "Ask": "", "Tell": "", "Let": "", "Send": "", "Email": "", "Contact": "",
	"Here": "", "There": "", "Today": "", "Yesterday": "", "Tomorrow": "", "After": "", "Before": "",
	"Since": "", "Until": "", "While": "", "About": "", "Via": "", "Per": "", "Re": "", "Fwd": "",
	"Hon": cuePerson, "Rev": cuePerson, "Judge": cuePerson, "Minister": cuePerson,
	"Senator": cuePerson, "Councillor": cuePerson, "Cllr": cuePerson, "Garda": cuePerson,
	"Sergeant": cuePerson, "Inspector": cuePerson, "Nurse": cuePerson,
}

// wordCues are lower-case words before a run that say what it is.
var wordCues = map[string]string{
	"in": cuePlace, "from": cuePlace, "near": cuePlace, "to": cuePlace, "at": cuePlace,
	"dear": cuePerson, "mr": cuePerson, "mrs": cuePerson, "ms": cuePerson, "dr": cuePerson,
	"called": cuePerson, "named": cuePerson, "ask": cuePerson,
	"contact": cuePerson,
}

// keyCues are keys and column headers and what their values are.
var keyCues = map[string]string{
	"name": cuePerson, "full_name": cuePerson, "fullname": cuePerson, "first_name": cuePerson,
	"firstname": cuePerson, "last_name": cuePerson, "lastname": cuePerson, "surname": cuePerson,
	"forename": cuePerson, "given_name": cuePerson, "family_name": cuePerson, "customer": cuePerson,
	"patient": cuePerson, "client": cuePerson, "employee": cuePerson, "contact": cuePerson,
	"person": cuePerson, "applicant": cuePerson, "beneficiary": cuePerson, "account_holder": cuePerson,
	"holder": cuePerson, "recipient": cuePerson, "sender": cuePerson, "owner": cuePerson,
	"attn": cuePerson, "signed": cuePerson,
	"next_of_kin": cuePerson, "signatory": cuePerson, "director": cuePerson, "manager": cuePerson,
	"company": cueOrg, "employer": cueOrg, "organisation": cueOrg, "organization": cueOrg,
	"org": cueOrg, "bank": cueOrg, "insurer": cueOrg, "business": cueOrg, "firm": cueOrg,
	"city": cueLocation, "town": cueLocation, "county": cueLocation, "country": cueLocation,
	"location": cueLocation, "place_of_birth": cueLocation, "birthplace": cueLocation,
	"region": cueLocation, "state": cueLocation, "locality": cueLocation,
	"address": cueAddress, "street": cueAddress, "address_line1": cueAddress,
	"address_line_1": cueAddress, "addr": cueAddress, "home_address": cueAddress,
	"street_address": cueAddress, "postal_address": cueAddress,
}

// personKeyPrefix are the x of keys x_name that hold a person's name.
var personKeyPrefix = set("customer patient client employee contact account holder user applicant " +
	"beneficiary owner sender recipient student member author person")

// givenNames are common given names in Ireland, the UK and the US: with
// a capitalised word after them they make a person without the model.
var givenNames = set(`Mary Patrick John James Robert Michael Seán Sean Siobhán Siobhan Aoife Niamh Ciarán Ciaran
Conor Cian Oisín Oisin Darragh Eoin Pádraig Padraig Séamus Seamus Brendan Declan Colm Cormac Dónal Donal
Eimear Gráinne Grainne Orla Róisín Roisin Saoirse Sinéad Sinead Caoimhe Clodagh Deirdre Máire Maire
Áine Aine Bríd Brid Brigid Nuala Úna Una Fionnuala Eileen Maureen Bridget Kathleen Catherine Margaret
Anne Ann Elizabeth Sarah Emma Laura Rachel Rebecca Hannah Sophie Chloe Grace Lucy Emily Olivia Amelia
Jessica Jennifer Linda Susan Karen Lisa Nancy Betty Helen Sandra Donna Carol Ruth Sharon Michelle
Kimberly Amy Angela Melissa Stephanie Nicole Heather Julie Joanne Claire Louise Fiona Alison Gillian
Thomas William David Richard Joseph Charles Christopher Daniel Matthew Anthony Mark Paul Steven
Andrew Kenneth Joshua Kevin Brian George Edward Ronald Timothy Jason Jeffrey Ryan Jacob Gary
Nicholas Eric Jonathan Stephen Larry Justin Scott Frank Benjamin Gregory Samuel Raymond Peter
Alexander Jack Dennis Jerry Tyler Aaron Henry Adam Nathan Zachary Kyle Noah Ethan Liam Oliver Harry
Charlie Alfie Freddie Oscar Archie Leo Finn Fionn Tadhg Ruairí Ruairi Aidan Aodhán Killian Fergal
Gerard Gerry Tom Tommy Jim Jimmy Joe Mick Mike Pat Paddy Dave Steve Tony Rob Bob Ted Niall Shane
Barry Kieran Eamon Éamon Eamonn Liam Gavin Alan Keith Colin Graham Neil Ian Gordon Hugh Martin
Philip Vincent Denis Dermot Fintan Lorcan Odhrán Rory Ronan Sorcha Ciara Aisling Ailbhe Éabha
Emer Muireann Nóra Nora Peig Sadhbh Síle Sile Treasa Dearbhla Laoise Meabh Méabh Maeve Nessa
Maria Anna Julia Sofia Isabella Mia Ava Ella Zoe Ruby Evie Isla Freya Poppy Daisy Alice Rose
Florence Ivy Jane Joan Dorothy Frances Judith Janet Teresa Patricia Barbara Debbie Tracy Wendy`)

// orgWords end the names of organisations: Allied Irish Banks, Acme Ltd.
var orgWords = set(`Bank Banks Bancorp Ltd Limited DAC PLC Plc plc LLC LLP Inc Incorporated Corp
Corporation Company Co Group Holdings Partners Associates Solicitors Accountants Insurance Assurance
Society Union Council Authority Agency Department Ministry Office Commission Board Service Services
University College Institute School Academy Hospital Clinic Trust Foundation Association Federation
Institution Credit Airlines Airways Motors Pharmaceuticals Pharma Technologies Technology Systems
Solutions Consulting Capital Investments Properties Media Telecom Energy Foods Stores Revenue HSE`)

// legalWords end the names of companies: in a heading they still count.
var legalWords = set("Ltd Limited DAC PLC Plc plc LLC LLP Inc Incorporated Corp Corporation Co GmbH")

// orgHeads open the names of organisations with "of": Bank of Ireland.
var orgHeads = set("Bank University College Department Ministry Office Institute Royal Council " +
	"Central Chamber Court Church Society Board")

// streetWords end the street of an address.
var streetWords = set(`Road Rd Street St Avenue Ave Lane Ln Drive Dr Terrace Tce Park Place Pl Square Sq
Court Ct Close Crescent Cres Grove Way Boulevard Blvd Quay Hill Row Gardens Gdns Green Parade Walk Mews
View Rise Vale Manor Heights Lawn Lawns Wood Woods Downs Estate Cottages Villas Highway Hwy Parkway
Pkwy Circle Cir Trail Plaza Broadway Embankment Wharf Strand Mall`)

// calendar words are months and days, never a name's first or last word.
var calendar = set(`January February March April June July August September October November December
Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec Monday Tuesday Wednesday Thursday Friday Saturday Sunday
Mon Tue Tues Wed Thu Thurs Fri Sat Sun Christmas Easter`)

// places are places that stand alone in text often enough to be named
// without the model: Ireland's counties and cities, and some of the UK's
// and the US's.
var places = set(`Dublin Cork Galway Limerick Waterford Kilkenny Sligo Wexford Wicklow Kerry Clare
Mayo Donegal Meath Louth Kildare Carlow Laois Offaly Westmeath Longford Roscommon Leitrim Cavan
Monaghan Tipperary Antrim Armagh Derry Down Fermanagh Tyrone Belfast Drogheda Dundalk Swords Bray
Navan Ennis Tralee Athlone Letterkenny Rathmines Ranelagh Drumcondra Clontarf Tallaght Blanchardstown
London Manchester Birmingham Liverpool Leeds Glasgow Edinburgh Cardiff Bristol Oxford Cambridge
Boston Chicago Seattle Philadelphia Houston Phoenix Denver Atlanta Miami Ireland England Scotland
Wales America Canada`)

// techWords are words of code and tools, which make a run not a name:
// Visual Studio, Hello World, Stack Trace, Data Frame.
var techWords = set(`Python Java JavaScript Typescript TypeScript Rust Golang Docker Kubernetes Linux
Ubuntu Debian Windows Apache Spark Hadoop Jupyter Notebook Visual Studio Code Node React Angular Vue
Django Flask Pandas Numpy NumPy SciPy Scipy Matplotlib Seaborn Torch Tensor Flow Keras Scikit Learn
Hugging Face Transformers Server Client Request Response Error Errors Exception Warning Traceback
File Files Line Hello World Data Frame Series Index Type Value Key True False None Null Test Tests
Step Build Version Release Object Class Module Function Method String Int Float List Dict Array Map
Set Table Column Row Field Default Config Settings Worker Job Task Queue Cache Database Query Model
Training Epoch Loss Accuracy Total Count Sum Mean Status Message Level Info Debug Collecting
Downloading Installing Successfully Requirement Already Running Starting Stopping Finished Loading
Saving Reading Writing Processing Using Usage Options Example Returns Raises Parameters Args Arguments
Attributes Read Write Open Close Get Post Put Delete Content Length Date Time Accept Agent Host
Cookie Authorization Mozilla Chrome Safari Firefox Gecko Edge Linux Apple Microsoft Google Amazon
Azure Cloud Lambda Bucket Stack Trace Overflow Git Github GitHub Gitlab Commit Merge Branch Pull
Push Issue Issues Ticket Bug Fix Feature Main Master Dev Prod Staging Local Remote Origin Upstream
Name Address Phone Email Mobile Number Account Amount Balance Currency Payment Invoice Order Orders
Item Items Product Products Customer Customers User Users Admin Password Token Secret Section Chapter
Figure Page Step Appendix Abstract Introduction Summary Conclusion Results Methods Discussion Table
Notes Todo Done Pending Failed Success Passed Skipped Ok Yes Warn Critical Fatal Panic Trace Unknown
Input Output Source Target Text Image Audio Video Plot Chart Graph Node Edge Tree Graph Sandbox
Shell Terminal Console Kernel Process Thread Memory Disk Network Port Socket Proxy Gateway`)

// usStates are the two-letter codes of US states.
var usStates = set(`AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ
NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY DC`)

// cueAddress: an address key or column.
const cueAddress = "address"
